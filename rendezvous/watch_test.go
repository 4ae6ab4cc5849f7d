package rendezvous

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lossRecorder collects onLost calls.
type lossRecorder struct {
	calls atomic.Int32
	errc  chan error
}

func newLossRecorder() *lossRecorder { return &lossRecorder{errc: make(chan error, 4)} }

func (l *lossRecorder) onLost(err error) {
	l.calls.Add(1)
	l.errc <- err
}

func (l *lossRecorder) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-l.errc:
		return err
	case <-time.After(within):
		t.Fatalf("onLost not called within %s", within)
		return nil
	}
}

func TestAbortReachesWatchAndCalls(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 2})
	c := dial(t, s.Addr(), secret)
	lost := newLossRecorder()
	if err := c.Watch(ctxFor(t, 10*time.Second), 20*time.Millisecond, 5*time.Second, lost.onLost); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := c.PeerTable(ctxFor(t, 5*time.Second))
		blocked <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Abort("rank 1 exited with status 3")
	s.Abort("second reason is ignored")
	err := lost.wait(t, 2*time.Second)
	if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 1 exited with status 3") {
		t.Errorf("onLost(%v), want ErrAborted with the reason", err)
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, ErrAborted) {
			t.Errorf("blocked PeerTable = %v, want ErrAborted", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("blocked PeerTable not woken by Abort")
	}
	if err := c.Register(ctxFor(t, time.Second), 0, "a", "x:1"); !errors.Is(err, ErrAborted) {
		t.Errorf("Register after Abort = %v", err)
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrAborted) {
		t.Errorf("Ping after Abort = %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := lost.calls.Load(); n != 1 {
		t.Errorf("onLost called %d times", n)
	}
}

func TestServerStopReportedAsLoss(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c := dial(t, s.Addr(), secret)
	lost := newLossRecorder()
	const grace, interval = 300 * time.Millisecond, 50 * time.Millisecond
	if err := c.Watch(ctxFor(t, 10*time.Second), interval, grace, lost.onLost); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	s.Stop()
	err := lost.wait(t, 3*time.Second)
	d := time.Since(start)
	if !errors.Is(err, ErrLost) {
		t.Errorf("onLost(%v), want ErrLost", err)
	}
	if d < grace-interval || d > grace+time.Second { // the last good ping may predate Stop
		t.Errorf("loss reported %s after Stop, grace %s", d, grace)
	}
	t.Logf("loss reported after %s: %v", d, err)
}

func TestWatchEndsWithContextAndClose(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c, err := Dial(ctxFor(t, 5*time.Second), s.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	lost := newLossRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Watch(ctx, 10*time.Millisecond, time.Second, lost.onLost); err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(context.Background(), 10*time.Millisecond, time.Second, lost.onLost); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	start := time.Now()
	c.Close()
	c.Close()
	// Close may wait for one ping still queued in gorpc until its timeout
	// (the grace here, 1s: see Close); more than that and a second of
	// scheduling on a loaded machine would be a Close that hangs. It took
	// 1.0006s once under ./test.sh with two busy helpers beside it.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s, want at most the ping's timeout (1s) and slack", d)
	}
	if n := lost.calls.Load(); n != 0 {
		t.Errorf("onLost called %d times on a healthy server", n)
	}
	if err := c.Watch(context.Background(), 0, 0, lost.onLost); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close = %v", err)
	}
	if err := c.Register(context.Background(), 0, "a", "x:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Register after Close = %v", err)
	}
}
