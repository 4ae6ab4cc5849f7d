package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// fakeController records what watch hands it; it stops the job when its
// due time comes (cause), and holds the job until woken.
type fakeController struct {
	dueAt   time.Time
	cause   error
	hold    bool
	woken   chan struct{}
	exits   int
	ticks   int
	settled int
	closed  bool
}

func (c *fakeController) exited(rankExit) error   { c.exits++; return nil }
func (c *fakeController) due() time.Time          { return c.dueAt }
func (c *fakeController) tick(time.Time) error    { c.ticks++; c.dueAt = time.Time{}; return c.cause }
func (c *fakeController) wakeup() <-chan struct{} { return c.woken }
func (c *fakeController) wake() error             { c.hold, c.woken = false, nil; return nil }
func (c *fakeController) settle(cause error) error {
	c.settled++
	return cause
}
func (c *fakeController) holds() bool { return c.hold }
func (c *fakeController) close()      { c.closed = true }

// testJob starts n fake ranks for watch.
func testJob(t *testing.T, n int) (*job, *fakeSpawner) {
	t.Helper()
	out, err := newOutput(io.Discard, io.Discard, "", n, outputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{GracePeriod: time.Minute}
	j := newJob(cfg, slog.New(slog.DiscardHandler), newFakeServer(n), out, make([]Slot, n))
	f := newFakeSpawner(t)
	for r := range n {
		if err := j.spawn(t.Context(), Slot{Host: "a", Rank: r, Size: n}, Command{}, 0, f); err != nil {
			t.Fatal(err)
		}
	}
	return j, f
}

// watchAsync runs watch in a goroutine and returns its result channel.
func watchAsync(j *job, ctl controller) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- j.watch(context.Background(), nil, ctl) }()
	return errc
}

// TestWatchStopsWhenTheControllerSays: the controller's due time comes
// and its tick returns a cause: watch stops the ranks, hands it no exit
// after that, and returns the cause with what it did; the controller is
// closed.
func TestWatchStopsWhenTheControllerSays(t *testing.T) {
	j, _ := testJob(t, 2)
	boom := errors.New("boom")
	ctl := &fakeController{dueAt: time.Now().Add(20 * time.Millisecond), cause: boom}
	err := await(t, watchAsync(j, ctl), 10*time.Second)
	if !errors.Is(err, boom) || err.Error() != "boom; stopped the other 2 ranks" {
		t.Errorf("watch = %v, want boom with the 2 ranks stopped", err)
	}
	if ctl.ticks != 1 || ctl.exits != 0 || ctl.settled != 0 || !ctl.closed {
		t.Errorf("controller: %d ticks, %d exits, %d settles, closed %v; want 1, 0, 0, true", ctl.ticks, ctl.exits, ctl.settled, ctl.closed)
	}
}

// TestWatchHoldsForTheController: every rank exits 0, but the controller
// holds the job until it is woken; then the job ends well.
func TestWatchHoldsForTheController(t *testing.T) {
	j, f := testJob(t, 2)
	woken := make(chan struct{})
	ctl := &fakeController{hold: true, woken: woken}
	errc := watchAsync(j, ctl)
	f.proc(0).exit(0)
	f.proc(1).exit(0)
	select {
	case err := <-errc:
		t.Fatalf("watch returned %v while the controller held the job", err)
	case <-time.After(100 * time.Millisecond): // not an assertion of timing: watch must not have returned
	}
	close(woken)
	if err := await(t, errc, 10*time.Second); err != nil {
		t.Errorf("watch = %v, want nil", err)
	}
	if ctl.exits != 2 || ctl.settled != 1 || !ctl.closed {
		t.Errorf("controller: %d exits, %d settles, closed %v; want 2, 1, true", ctl.exits, ctl.settled, ctl.closed)
	}
}

// TestAlarm: an alarm keeps its timer while the due time stays, sets a
// new one when it changes, and has none for the zero time.
func TestAlarm(t *testing.T) {
	var a alarm
	if a.at(time.Time{}) != nil {
		t.Error("a channel for the zero time")
	}
	soon := time.Now().Add(10 * time.Millisecond)
	c := a.at(soon)
	if a.at(soon) != c {
		t.Error("a new timer for the same due time")
	}
	later := time.Now().Add(time.Hour)
	if a.at(later) == c {
		t.Error("the same timer for a new due time")
	}
	c = a.at(soon)
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("the alarm did not fire")
	}
	a.fired()
	if a.t != nil {
		t.Error("a timer left after fired")
	}
}
