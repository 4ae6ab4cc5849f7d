package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// exited and killed are the failures of rank r as Process.Wait reports them.
func exited(r, status int) error { return &ExitError{Rank: r, Host: "h", Status: status} }
func killed(r int, sig string) error {
	return &ExitError{Rank: r, Host: "h", Status: -1, Signal: sig}
}

func TestCulprit(t *testing.T) {
	lost := fmt.Errorf("runner: rank 4 on h: ssh: %w", errors.New("connection reset"))
	for _, tc := range []struct {
		name  string
		fails []failedRank // in order of exit
		want  int          // rank
	}{
		{"one failure", []failedRank{{rank: 2, err: exited(2, 3)}}, 2},
		{"a rank that blamed a peer yields to one that did not",
			[]failedRank{{rank: 0, err: exited(0, 1), because: "1"}, {rank: 1, err: exited(1, 7)}}, 1},
		{"every survivor blamed the crashed rank",
			[]failedRank{{rank: 0, err: exited(0, 1), because: "1"}, {rank: 2, err: exited(2, 1), because: "0"}, {rank: 1, err: exited(1, 2)}}, 1},
		{"a signal death beats an earlier plain failure",
			[]failedRank{{rank: 2, err: exited(2, 1)}, {rank: 1, err: killed(1, "SIGSEGV")}}, 1},
		{"a signal death beats an earlier reported failure",
			[]failedRank{{rank: 0, err: exited(0, 1), because: "1"}, {rank: 1, err: killed(1, "SIGKILL")}}, 1},
		{"a signal death that blamed a peer yields to a plain failure",
			[]failedRank{{rank: 0, err: killed(0, "SIGABRT"), because: "3"}, {rank: 3, err: exited(3, 1)}}, 3},
		{"a peer's shutdown counts as a cause",
			[]failedRank{{rank: 2, err: exited(2, 1), because: jobenv.PeerShutdown}, {rank: 0, err: exited(0, 1)}}, 0},
		{"earliest among plain failures", []failedRank{{rank: 3, err: exited(3, 4)}, {rank: 1, err: exited(1, 5)}}, 3},
		{"earliest among signal deaths",
			[]failedRank{{rank: 3, err: exited(3, 4)}, {rank: 2, err: killed(2, "SIGKILL")}, {rank: 0, err: killed(0, "SIGSEGV")}}, 2},
		{"earliest when every rank blamed a peer",
			[]failedRank{{rank: 2, err: exited(2, 1), because: "1"}, {rank: 1, err: exited(1, 1), because: "2"}}, 2},
		{"a lost ssh connection is a failure of its own",
			[]failedRank{{rank: 0, err: exited(0, 1), because: "4"}, {rank: 4, err: lost}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fails[culprit(tc.fails)].rank; got != tc.want {
				t.Errorf("culprit = rank %d, want rank %d", got, tc.want)
			}
		})
	}
}

// reportAs stores, as rank's hvd runtime does, that a peer caused its
// failure.
func reportAs(t *testing.T, f *fakeSpawner, rank int, because string) {
	t.Helper()
	ctx := rendezvousCtx(t)
	env := environOf(t, f.cmd(rank).Env)
	c, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, jobenv.FailedBecauseKey(rank), []byte(because)); err != nil {
		t.Fatal(err)
	}
}

// rendezvousCtx bounds a test's calls to the job's rendezvous, which
// clients retry while the server is unreachable (Launch has returned).
func rendezvousCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// registerAs registers rank with the job's rendezvous, as hvd.Init does;
// the client stays open until the test ends.
func registerAs(t *testing.T, f *fakeSpawner, rank int) {
	t.Helper()
	ctx := rendezvousCtx(t)
	env := environOf(t, f.cmd(rank).Env)
	c, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Register(ctx, rank, env.Hostname, fmt.Sprintf("127.0.0.1:%d", 9000+rank)); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchBlamesTheRankThatFailedOnItsOwn: rank 0 fails first, having
// reported that rank 1's failure caused its own; rank 1 fails after it.
// Launch names rank 1 with its status, whichever exit it sees first.
func TestLaunchBlamesTheRankThatFailedOnItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		crash   func(p *fakeProc)
		want    string
		wantErr *ExitError
	}{
		{"exit 7", func(p *fakeProc) { p.exit(7) },
			"runner: rank 1 on a exited with status 7; stopped the other rank",
			&ExitError{Rank: 1, Host: "a", Status: 7}},
		{"signal", func(p *fakeProc) { p.finish(&ExitError{Rank: 1, Host: "a", Status: -1, Signal: "SIGSEGV"}) },
			"runner: rank 1 on a was killed by SIGSEGV; stopped the other rank",
			&ExitError{Rank: 1, Host: "a", Status: -1, Signal: "SIGSEGV"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSpawner(t)
			errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
			f.waitSpawned(3)
			reportAs(t, f, 0, "1")
			f.proc(0).exit(1)
			_ = pingAs(t, f, 2) // a round trip, so that Launch most likely sees rank 0's exit first
			tc.crash(f.proc(1))
			err := await(t, errc, 5*time.Second)
			if ee := exitErrorOf(t, err); *ee != *tc.wantErr {
				t.Errorf("ExitError = %+v, want %+v", ee, tc.wantErr)
			}
			if err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
		})
	}
}

// TestLaunchWaitsOnWhileEveryFailureBlamesAPeer: rank 0 fails, reporting
// that rank 1 caused it, and rank 1 fails only after the blame window (a
// slow core dump, say). Launch waits on for it and names it.
func TestLaunchWaitsOnWhileEveryFailureBlamesAPeer(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
	f.waitSpawned(3)
	reportAs(t, f, 0, "1")
	f.proc(0).exit(1)
	time.Sleep(2 * blameWindow) // not an assertion: rank 1 fails after the window
	f.proc(1).exit(7)
	err := await(t, errc, 5*time.Second)
	if ee := exitErrorOf(t, err); ee.Rank != 1 || ee.Status != 7 {
		t.Errorf("ExitError = %+v, want rank 1, status 7", ee)
	}
	if want := "runner: rank 1 on a exited with status 7; stopped the other rank"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestLaunchWaitIsBounded: when every failed rank blamed a peer that never
// fails, Launch still stops the job, blameWait after the first failure,
// naming the earliest.
func TestLaunchWaitIsBounded(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
	f.waitSpawned(3)
	reportAs(t, f, 0, "1")
	f.proc(0).exit(1)
	err := await(t, errc, blameWait+5*time.Second)
	if want := "runner: rank 0 on a exited with status 1; stopped the other 2 ranks"; err == nil || err.Error() != want {
		t.Errorf("Launch = %v, want %q", err, want)
	}
}

// TestLaunchNamesFirstFailureWithoutReports: without reports or signals,
// the blame window ends with the only failed rank, and the other ranks,
// still running, are stopped as before.
func TestLaunchNamesFirstFailureWithoutReports(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
	f.waitSpawned(3)
	f.proc(2).exit(3)
	err := await(t, errc, 5*time.Second)
	if ee := exitErrorOf(t, err); ee.Rank != 2 || ee.Status != 3 {
		t.Errorf("ExitError = %+v, want rank 2, status 3", ee)
	}
	if want := "runner: rank 2 on a exited with status 3; stopped the other 2 ranks"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestLaunchRankLeftBeforeJoining: rank 1 exits 0 without registering
// while rank 0 waits in the rendezvous. Launch stops the job at once,
// naming rank 1, whether rank 0 registered before or after rank 1 left.
func TestLaunchRankLeftBeforeJoining(t *testing.T) {
	for _, registerFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("registered first %v", registerFirst), func(t *testing.T) {
			f := newFakeSpawner(t)
			// Rank 0 is two parts: its fake process, and this test's
			// registerAs, which plays its hvd.Init. A real process cannot
			// end while its own Register call waits for the reply, so
			// neither does this one: told to stop, it exits only once
			// registerAs has returned. Otherwise Launch can return, and
			// stop the rendezvous, between the server taking in the
			// registration (which stops the job) and its reply reaching
			// registerAs, which then finds the server gone.
			registered := make(chan struct{})
			var aborted error
			f.onSignal = func(p *fakeProc, _ os.Signal) { // rank 0 asks the rendezvous when told to stop
				if p.slot.Rank != 0 {
					return
				}
				select {
				case <-registered:
				case <-t.Context().Done(): // registerAs failed the test
					return
				}
				aborted = pingAs(t, f, 0)
			}
			errc := launchAsync(t.Context(), fakeConfig(t, f, "a:2", 2, &testutil.SyncBuffer{}))
			f.waitSpawned(2)
			if registerFirst {
				registerAs(t, f, 0)
				close(registered)
			}
			f.proc(1).exit(0)
			if !registerFirst {
				registerAs(t, f, 0)
				close(registered)
			}
			err := await(t, errc, 5*time.Second)
			const want = "runner: rank 1 on a exited with status 0 before joining the job; stopped the other rank"
			if err == nil || err.Error() != want {
				t.Fatalf("Launch = %v, want %q", err, want)
			}
			if ee := exitErrorOf(t, err); ee.Rank != 1 || ee.Status != 0 {
				t.Errorf("ExitError = %+v, want rank 1, status 0", ee)
			}
			if !errors.Is(aborted, rendezvous.ErrAborted) || !strings.Contains(aborted.Error(), "rank 1 on a exited with status 0 before joining the job") {
				t.Errorf("rank 0's Ping after the stop = %v, want ErrAborted naming rank 1", aborted)
			}
		})
	}
}

// pingAs pings the job's rendezvous as rank would.
func pingAs(t *testing.T, f *fakeSpawner, rank int) error {
	ctx := rendezvousCtx(t)
	env := environOf(t, f.cmd(rank).Env)
	c, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Ping(ctx)
}

// TestLaunchRanksThatNeverJoin: ranks that exit 0 without registering are
// fine while no rank registers (a program that does not use hvd), and so
// are ranks that exit 0 after registering, in any order.
func TestLaunchRanksThatNeverJoin(t *testing.T) {
	for _, register := range []bool{false, true} {
		t.Run(fmt.Sprintf("registered %v", register), func(t *testing.T) {
			f := newFakeSpawner(t)
			errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
			f.waitSpawned(3)
			if register {
				for r := range 3 {
					registerAs(t, f, r)
				}
			}
			for _, r := range []int{2, 0, 1} {
				f.proc(r).exit(0)
			}
			if err := await(t, errc, 5*time.Second); err != nil {
				t.Errorf("Launch = %v, want nil", err)
			}
		})
	}
}

func TestSilentBecause(t *testing.T) {
	v := jobenv.SilentBecause([]int{1, 3}, 2*time.Second)
	if v != "silent 1,3 2s" {
		t.Errorf("SilentBecause = %q, want %q", v, "silent 1,3 2s")
	}
	ranks, limit, ok := jobenv.ParseSilent(v)
	if !ok || !slices.Equal(ranks, []int{1, 3}) || limit != 2*time.Second {
		t.Errorf("jobenv.ParseSilent(%q) = %v, %v, %v", v, ranks, limit, ok)
	}
	for _, bad := range []string{"1", jobenv.PeerGone, jobenv.PeerShutdown, "unspecified", "silent", "silent 1", "silent x 2s", "silent 1 two", "silent -1 2s", "silent 1 2s 3"} {
		if _, _, ok := jobenv.ParseSilent(bad); ok {
			t.Errorf("jobenv.ParseSilent(%q) accepted it", bad)
		}
	}
}

func TestUnresponsive(t *testing.T) {
	silent := func(limit time.Duration, ranks ...int) string { return jobenv.SilentBecause(ranks, limit) }
	all := func(int) bool { return true }
	for _, tc := range []struct {
		name     string
		fails    []failedRank
		eligible func(int) bool
		want     int // rank; -1: none
		by       []int
		limit    time.Duration
	}{
		{"no reports", []failedRank{{rank: 0, err: exited(0, 1)}}, all, -1, nil, 0},
		{"a peer that went away is not silent", []failedRank{{rank: 0, err: exited(0, 1), because: "1"}}, all, -1, nil, 0},
		{"one report", []failedRank{{rank: 0, err: exited(0, 1), because: silent(2*time.Second, 1)}}, all, 1, []int{0}, 2 * time.Second},
		{"two reports agree",
			[]failedRank{{rank: 2, err: exited(2, 1), because: silent(time.Second, 1)}, {rank: 0, err: exited(0, 1), because: silent(2*time.Second, 1)}},
			all, 1, []int{2, 0}, 2 * time.Second},
		{"the most named wins over one named beside it",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent(time.Second, 2, 3)}, {rank: 1, err: exited(1, 1), because: silent(time.Second, 3)}},
			all, 3, []int{0, 1}, time.Second},
		{"a rank that reported another silent was answering",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent(time.Second, 1, 2)}, {rank: 2, err: exited(2, 1), because: silent(time.Second, 1)}},
			all, 1, []int{0, 2}, time.Second},
		{"the lowest among equals",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent(time.Second, 3, 2)}},
			all, 2, []int{0}, time.Second},
		{"ranks that accuse each other name nobody",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent(time.Second, 1)}, {rank: 1, err: exited(1, 1), because: silent(time.Second, 0)}},
			all, -1, nil, 0},
		{"a rank that exited 0 is not named",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent(time.Second, 1)}},
			func(r int) bool { return r != 1 }, -1, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := unresponsive(tc.fails, tc.eligible)
			switch {
			case tc.want < 0 && ok:
				t.Errorf("unresponsive = rank %d, want none", v.rank)
			case tc.want >= 0 && (!ok || v.rank != tc.want || !slices.Equal(v.by, tc.by) || v.limit != tc.limit):
				t.Errorf("unresponsive = %+v (ok %v), want rank %d by %v within %v", v, ok, tc.want, tc.by, tc.limit)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	silent := jobenv.SilentBecause([]int{1}, 2*time.Second)
	all := func(int) bool { return true }
	for _, tc := range []struct {
		name   string
		fails  []failedRank
		want   int // rank
		silent bool
	}{
		{"a silent report outranks its own reporter", []failedRank{{rank: 0, err: exited(0, 1), because: silent}}, 1, true},
		{"a silent report outranks a plain failure",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent}, {rank: 2, err: exited(2, 1)}}, 1, true},
		{"a silent report outranks a peer-gone report",
			[]failedRank{{rank: 2, err: exited(2, 1), because: "0"}, {rank: 0, err: exited(0, 1), because: silent}}, 1, true},
		{"a signal death outranks a silent report",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent}, {rank: 2, err: killed(2, "SIGSEGV")}}, 2, false},
		{"a signal death of the silent rank names it as silent",
			[]failedRank{{rank: 0, err: exited(0, 1), because: silent}, {rank: 1, err: killed(1, "SIGSEGV"), because: "0"}}, 1, true},
		{"without silent reports the culprit",
			[]failedRank{{rank: 0, err: exited(0, 1), because: "1"}, {rank: 1, err: exited(1, 7)}}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, v, s := verdict(tc.fails, all)
			got := tc.fails[i].rank
			if s {
				got = v.rank
			}
			if got != tc.want || s != tc.silent {
				t.Errorf("verdict = rank %d (silent %v), want rank %d (silent %v)", got, s, tc.want, tc.silent)
			}
		})
	}
}

func TestUnresponsiveErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  *UnresponsiveError
		want string
	}{
		{&UnresponsiveError{Rank: 1, Host: "n2", Limit: 2 * time.Second, ReportedBy: []int{0}},
			"runner: rank 1 on n2 stopped answering (no answer within 2s, reported by rank 0)"},
		{&UnresponsiveError{Rank: 1, Host: "n2", Limit: time.Minute, ReportedBy: []int{0, 2}},
			"runner: rank 1 on n2 stopped answering (no answer within 1m0s, reported by ranks 0 and 2)"},
		{&UnresponsiveError{Rank: 3, Host: "n2", ReportedBy: []int{0, 1, 2}},
			"runner: rank 3 on n2 stopped answering (no answer, reported by ranks 0, 1 and 2)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestLaunchNamesTheRankThatStoppedAnswering: rank 1 is frozen (it ignores
// SIGTERM, as a stopped process does); rank 0 fails, reporting that rank 1
// did not answer within 2s, and rank 2 exits with status 1 without a
// report. Launch names rank 1 as not answering, not a survivor, within
// the blame window rather than blameWait, and kills rank 1 at once rather
// than after the grace period.
func TestLaunchNamesTheRankThatStoppedAnswering(t *testing.T) {
	for _, tc := range []struct {
		name string
		rest func(f *fakeSpawner) // what rank 2 does after rank 0 failed
		want string
	}{
		{"a survivor still running",
			func(*fakeSpawner) {},
			"runner: rank 1 on a stopped answering (no answer within 2s, reported by rank 0); killed it; stopped the other rank"},
		{"a survivor exited without a report",
			func(f *fakeSpawner) { f.proc(2).exit(1) },
			"runner: rank 1 on a stopped answering (no answer within 2s, reported by rank 0); killed it"},
		{"two reports",
			func(f *fakeSpawner) {
				reportAs(t, f, 2, jobenv.SilentBecause([]int{1}, time.Second))
				f.proc(2).exit(1)
			},
			"runner: rank 1 on a stopped answering (no answer within 2s, reported by ranks 0 and 2); killed it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSpawner(t)
			f.ignore[1] = true
			cfg := fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{})
			cfg.GracePeriod = time.Minute // a kill after the grace period would miss the deadline below
			errc := launchAsync(t.Context(), cfg)
			f.waitSpawned(3)
			start := time.Now()
			reportAs(t, f, 0, jobenv.SilentBecause([]int{1}, 2*time.Second))
			f.proc(0).exit(1)
			tc.rest(f)
			err := await(t, errc, blameWait+5*time.Second)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Launch = %v, want %q", err, tc.want)
			}
			u, ok := errors.AsType[*UnresponsiveError](err)
			if !ok || u.Rank != 1 || u.Exit != nil {
				t.Errorf("Launch's error %v: UnresponsiveError %+v, want rank 1, still running", err, u)
			}
			if _, ok := errors.AsType[*ExitError](err); ok {
				t.Errorf("Launch's error %v wraps a survivor's ExitError", err)
			}
			signals, _, killAt := f.proc(1).record()
			if killAt.IsZero() || slices.Contains(signals, os.Signal(syscall.SIGTERM)) {
				t.Errorf("rank 1 got %v and Kill at %v; want Kill and no SIGTERM", signals, killAt)
			}
			if took := time.Since(start); took >= blameWait {
				t.Errorf("Launch took %v, want less than blameWait %v: it named rank 1 when the window ended", took, blameWait)
			}
		})
	}
}

// TestLaunchSilentReportYieldsToASignalDeath: rank 0 reports that rank 1
// did not answer, but rank 2 dies of SIGSEGV on its own: Launch names
// rank 2 (a crash that made the others wait is its own failure).
func TestLaunchSilentReportYieldsToASignalDeath(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{}))
	f.waitSpawned(3)
	reportAs(t, f, 0, jobenv.SilentBecause([]int{1}, 2*time.Second))
	f.proc(0).exit(1)
	_ = pingAs(t, f, 2) // a round trip, so that Launch most likely sees rank 0's exit first
	f.proc(2).finish(&ExitError{Rank: 2, Host: "a", Status: -1, Signal: "SIGSEGV"})
	err := await(t, errc, blameWait+5*time.Second)
	// Launch may see rank 2's death before rank 0's exit: "the other rank"
	// or "the other 2 ranks".
	if want := "runner: rank 2 on a was killed by SIGSEGV; stopped the other "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Launch = %v, want %q...", err, want)
	}
	if _, ok := errors.AsType[*UnresponsiveError](err); ok {
		t.Errorf("Launch = %v, want no UnresponsiveError", err)
	}
}

// newBlamer is a blamer that reads reports from reports and takes ranks
// in running as running.
func newBlamer(reports map[int]string, running ...int) *blamer {
	return &blamer{
		report:  func(rank int) string { return reports[rank] },
		running: func(rank int) bool { return slices.Contains(running, rank) },
	}
}

// TestBlamerWindow: a plain failure opens the blame window, which later
// failures do not move; when it ends the verdict is due, and names the
// earliest plain failure.
func TestBlamerWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBlamer(map[int]string{}, 2)
	if b.pending() {
		t.Fatal("pending before any failure")
	}
	if b.failed(1, exited(1, 3), t0) {
		t.Error("a plain failure made the verdict due at once")
	}
	if want := t0.Add(blameWindow); !b.due.Equal(want) {
		t.Errorf("due %v, want %v", b.due, want)
	}
	if b.failed(0, exited(0, 4), t0.Add(100*time.Millisecond)) || !b.due.Equal(t0.Add(blameWindow)) {
		t.Errorf("a second failure: due %v, want the window unmoved (%v)", b.due, t0.Add(blameWindow))
	}
	if !b.windowEnded(t0.Add(blameWindow)) {
		t.Fatal("the window ended without a verdict due")
	}
	v := b.verdict()
	if v.silent || v.culprit.rank != 1 || v.blamed() != 1 || len(v.others) != 1 || v.others[0].rank != 0 {
		t.Errorf("verdict %+v, want rank 1 with rank 0 beside it", v)
	}
}

// TestBlamerSignalDeathAtOnce: a death by a signal that the rank did not
// blame on a peer makes the verdict due at once, window or not.
func TestBlamerSignalDeathAtOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBlamer(map[int]string{0: "2"})
	if b.failed(0, killed(0, "SIGABRT"), t0) {
		t.Error("a signal death that blamed a peer made the verdict due at once")
	}
	if !b.failed(2, killed(2, "SIGSEGV"), t0.Add(time.Millisecond)) {
		t.Error("a signal death of its own did not make the verdict due at once")
	}
	if v := b.verdict(); v.blamed() != 2 {
		t.Errorf("verdict names rank %d, want 2", v.blamed())
	}
}

// TestBlamerWaitsOn: when the window ends with only failures that blamed
// a peer, the blamer waits on up to blameWait after the first failure; a
// plain failure then makes the verdict due at once, and names that rank.
// Without one, the end of the wait names the earliest.
func TestBlamerWaitsOn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, comes := range []bool{true, false} {
		t.Run(fmt.Sprintf("failure comes %v", comes), func(t *testing.T) {
			b := newBlamer(map[int]string{0: "1", 2: jobenv.PeerGone}, 1)
			b.failed(0, exited(0, 1), t0)
			b.failed(2, exited(2, 1), t0.Add(10*time.Millisecond))
			if b.windowEnded(t0.Add(blameWindow)) {
				t.Fatal("the window ended with a verdict due; every failure blamed a peer")
			}
			if want := t0.Add(blameWait); !b.due.Equal(want) {
				t.Errorf("due %v, want %v (blameWait after the first failure)", b.due, want)
			}
			want := 0
			if comes {
				if !b.failed(1, exited(1, 7), t0.Add(time.Second)) {
					t.Fatal("a plain failure while waiting on did not make the verdict due")
				}
				want = 1
			} else if !b.windowEnded(b.due) {
				t.Fatal("the end of the wait did not make the verdict due")
			}
			if v := b.verdict(); v.blamed() != want {
				t.Errorf("verdict names rank %d, want %d", v.blamed(), want)
			}
		})
	}
}

// TestBlamerRereadsReports: a rank may report after its exit was seen;
// the verdict reads the reports again.
func TestBlamerRereadsReports(t *testing.T) {
	t0 := time.Unix(1000, 0)
	reports := map[int]string{}
	b := newBlamer(reports)
	b.failed(0, exited(0, 1), t0)
	b.failed(1, exited(1, 7), t0)
	reports[0] = "1"
	if v := b.verdict(); v.blamed() != 1 || v.others[0].because != "1" {
		t.Errorf("verdict %+v, want rank 1, rank 0's late report read", v)
	}
}

// TestBlamerSilent: a report that a rank did not answer ends the window
// with a verdict naming that rank, still running (no exit of its own) or
// failed (its failure); a rank that exited 0 cannot be named, and the
// blamer waits on as for any failure that blamed a peer.
func TestBlamerSilent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	silent := jobenv.SilentBecause([]int{1}, 2*time.Second)

	b := newBlamer(map[int]string{0: silent}, 1, 2)
	b.failed(0, exited(0, 1), t0)
	if !b.windowEnded(t0.Add(blameWindow)) {
		t.Fatal("the window ended without a verdict; a rank was named as silent")
	}
	if v := b.verdict(); !v.silent || v.vote.rank != 1 || v.silentExit != nil || !slices.Equal(v.vote.by, []int{0}) || v.vote.limit != 2*time.Second {
		t.Errorf("verdict %+v, want rank 1 silent, still running, reported by rank 0 within 2s", v)
	}

	b = newBlamer(map[int]string{0: silent}, 2)
	b.failed(0, exited(0, 1), t0)
	b.failed(1, exited(1, 9), t0)
	if v := b.verdict(); !v.silent || v.vote.rank != 1 || v.silentExit == nil || len(v.others) != 1 || v.others[0].rank != 0 {
		t.Errorf("verdict %+v, want rank 1 silent with its own failure, rank 0 beside it", v)
	}

	b = newBlamer(map[int]string{0: silent}, 2) // rank 1 exited 0
	b.failed(0, exited(0, 1), t0)
	if b.windowEnded(t0.Add(blameWindow)) {
		t.Error("the window ended with a verdict naming a rank that exited 0")
	}
}
