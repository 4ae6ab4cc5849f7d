package runner

import (
	"errors"
	"log/slog"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestEscalation: SIGTERM to every running rank but the frozen one, which
// gets SIGKILL at once; after the grace period SIGKILL to those still
// running (counted, the frozen one aside); killWait later it gives up.
func TestEscalation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ranks := fakeRanks(4, 2, 3) // ranks 2 and 3 ignore SIGTERM
	e := escalation{grace: 3 * time.Second, log: slog.New(slog.DiscardHandler)}
	frozen := ranks[3]
	e.begin(ranks[1:], frozen, t0) // rank 0 has ended
	if want := t0.Add(3 * time.Second); !e.due.Equal(want) {
		t.Errorf("due %v, want the end of the grace period %v", e.due, want)
	}
	for r, want := range []string{"[]", "[terminated]", "[terminated]", "[]"} {
		sigs, _, killAt := ranks[r].proc.(*fakeProc).record()
		if fmtSignals(sigs) != want || killAt.IsZero() != (r != 3) {
			t.Errorf("rank %d got %v, killed %v; want %v, killed only if frozen", r, sigs, !killAt.IsZero(), want)
		}
	}
	if e.stopping != 2 {
		t.Errorf("stopping %d, want 2 (the frozen rank aside)", e.stopping)
	}
	ranks[1].done = true
	if e.next([]*rankProc{ranks[2], ranks[3]}, e.due) {
		t.Fatal("gave up at the end of the grace period")
	}
	if _, _, killAt := ranks[2].proc.(*fakeProc).record(); killAt.IsZero() || e.killed != 1 {
		t.Errorf("rank 2 killed at %v, %d killed; want it killed, 1 counted", killAt, e.killed)
	}
	if want := t0.Add(3*time.Second + killWait); !e.due.Equal(want) {
		t.Errorf("due %v, want %v", e.due, want)
	}
	if !e.next(nil, e.due) || !e.due.IsZero() {
		t.Errorf("did not give up killWait after SIGKILL (due %v)", e.due)
	}
}

// TestEscalationDescribe: Launch's error says what was done about the
// other ranks.
func TestEscalationDescribe(t *testing.T) {
	failure := &ExitError{Rank: 1, Host: "a", Status: 7}
	stuck := errors.New("1 rank did not exit within 2s of SIGKILL")
	for _, tc := range []struct {
		name    string
		e       escalation
		failure error
		stuck   error
		want    string
	}{
		{"alone", escalation{}, failure, nil, "runner: rank 1 on a exited with status 7"},
		{"one other", escalation{stopping: 1}, failure, nil, "runner: rank 1 on a exited with status 7; stopped the other rank"},
		{"others, killed", escalation{stopping: 3, killed: 2, grace: 3 * time.Second}, failure, nil,
			"runner: rank 1 on a exited with status 7; stopped the other 3 ranks (2 with SIGKILL after the 3s grace period)"},
		{"stuck", escalation{stopping: 2, killed: 1, grace: time.Second}, failure, stuck,
			"runner: rank 1 on a exited with status 7; stopped the other 2 ranks (1 with SIGKILL after the 1s grace period); 1 rank did not exit within 2s of SIGKILL"},
		{"interrupted", escalation{stopping: 2}, ErrInterrupted, nil, "runner: interrupted; stopped 2 running ranks"},
		{"frozen alone", escalation{frozen: &rankProc{}}, failure, nil, "runner: rank 1 on a exited with status 7; killed it"},
		{"frozen and one other", escalation{frozen: &rankProc{}, stopping: 1}, failure, nil,
			"runner: rank 1 on a exited with status 7; killed it; stopped the other rank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.e.describe(tc.failure, tc.stuck)
			if err.Error() != tc.want || !errors.Is(err, tc.failure) {
				t.Errorf("describe = %q, want %q wrapping the failure", err, tc.want)
			}
		})
	}
}

// TestJobStopKillsTheFrozenRank: a job stopped by an *UnresponsiveError
// for a rank still running kills that rank at once and SIGTERMs the
// others; one stopped by the rank's own failure kills nobody at once.
func TestJobStopKillsTheFrozenRank(t *testing.T) {
	for _, frozen := range []bool{true, false} {
		srv := newFakeServer(3)
		j := newJob(Config{GracePeriod: time.Minute}, slog.New(slog.DiscardHandler), srv, nil, make([]Slot, 3))
		j.ranks, j.running = fakeRanks(3), 3
		u := &UnresponsiveError{Rank: 1, Host: "a", ReportedBy: []int{0}}
		if !frozen {
			u.Exit = exited(1, 1)
		}
		j.stop(u)
		sigs, _, killAt := j.ranks[1].proc.(*fakeProc).record()
		if got := !killAt.IsZero() && !slices.Contains(sigs, os.Signal(syscall.SIGTERM)); got != frozen {
			t.Errorf("frozen %v: rank 1 got %v, killed %v", frozen, sigs, !killAt.IsZero())
		}
		if srv.aborted != "rank 1 on a stopped answering (no answer, reported by rank 0)" {
			t.Errorf("the rendezvous was aborted with %q", srv.aborted)
		}
	}
}
