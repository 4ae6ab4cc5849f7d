package runner

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
)

// TestAssignPS: the servers spread across the hosts first, the workers
// fill the free slots in order, and the chief runs on the first host
// without a slot.
func TestAssignPS(t *testing.T) {
	tests := []struct {
		hosts            string
		workers, servers int
		want             []string // host of each rank
	}{
		{"a:2,b:2", 2, 2, []string{"a", "a", "b", "a", "b"}},
		{"a:4", 3, 1, []string{"a", "a", "a", "a", "a"}},
		{"a:1,b:1,c:2", 2, 2, []string{"a", "c", "c", "a", "b"}},
		{"a:2,b:1", 1, 2, []string{"a", "a", "a", "b"}},
		{"a:1,b:3", 1, 3, []string{"a", "b", "a", "b", "b"}},
		{"a:2,b:2,c:2", 1, 2, []string{"a", "a", "a", "b"}},
	}
	for _, tt := range tests {
		hosts, err := ParseHosts(tt.hosts)
		if err != nil {
			t.Fatal(err)
		}
		slots, err := AssignPS(hosts, tt.workers, tt.servers)
		if err != nil {
			t.Errorf("%s workers %d servers %d: %v", tt.hosts, tt.workers, tt.servers, err)
			continue
		}
		var got []string
		for r, s := range slots {
			got = append(got, s.Host)
			if s.Rank != r || s.Size != len(tt.want) {
				t.Errorf("%s: slot %d has rank %d of %d", tt.hosts, r, s.Rank, s.Size)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s workers %d servers %d: hosts %q, want %q", tt.hosts, tt.workers, tt.servers, got, tt.want)
		}
	}
	hosts, _ := ParseHosts("a:2,b:2")
	slots, _ := AssignPS(hosts, 2, 2)
	if s := slots[3]; s.LocalRank != 2 || s.LocalSize != 3 || s.CrossRank != 0 || s.CrossSize != 1 {
		t.Errorf("server 0 on a: local %d of %d, cross %d of %d; want local 2 of 3 (the chief counts), cross 0 of 1",
			s.LocalRank, s.LocalSize, s.CrossRank, s.CrossSize)
	}
}

// TestAssignPSErrors: too many ranks for the slots, and no server or no
// worker, are errors before anything starts.
func TestAssignPSErrors(t *testing.T) {
	hosts, _ := ParseHosts("a:2,b:2")
	for _, tt := range []struct {
		workers, servers int
		is               error
		want             string
	}{
		{3, 2, ErrSlots, "--ps 2 servers and -np 3 workers need 5 slots, but the hosts have 4 (a:2, b:2); the chief takes none"},
		{2, 0, ErrNumProc, "--ps 0"},
		{0, 1, ErrNumProc, "-np 0"},
	} {
		_, err := AssignPS(hosts, tt.workers, tt.servers)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("workers %d servers %d: %v, want %v naming %q", tt.workers, tt.servers, err, tt.is, tt.want)
		}
	}
}

// TestValidatePS: --ps with an elastic job, with srun steps, a negative
// --ps, --evaluator without --ps and too few slots are errors.
func TestValidatePS(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"elastic", func(c *Config) { c.MinNP = 1 }, "--ps cannot make an elastic job"},
		{"srun", func(c *Config) { c.Launcher = SpawnSrun }, "--ps cannot run its ranks as srun steps"},
		{"negative", func(c *Config) { c.PS = -1 }, "--ps -1 is negative"},
		{"evaluator alone", func(c *Config) { c.PS, c.Evaluator = 0, true }, "--evaluator needs a parameter-server job"},
		{"evaluator timeout alone", func(c *Config) { c.EvaluatorTimeout = time.Second }, "--evaluator-timeout needs --evaluator"},
		{"too many", func(c *Config) { c.PS = 3 }, "--ps 3 servers and -np 2 workers need 5 slots, but the hosts have 4"},
		{"too many on localhost", func(c *Config) { c.Hosts, c.NP, c.PS = nil, MaxSlotsPerHost, 1 }, "exceed the"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Hosts, _ = ParseHosts("a:2,b:2")
			cfg.NP, cfg.PS, cfg.Command = 2, 2, []string{"train"}
			tt.set(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error naming %q", err, tt.want)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.NP, cfg.PS, cfg.Evaluator, cfg.Command = 2, 1, true, []string{"train"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("2 workers and 1 server on localhost with an evaluator: %v", err)
	}
}

// psConfig is a parameter-server job of 2 workers and 2 servers on a:2,b:2
// (ranks: 0 chief on a, 1 worker a, 2 worker b, 3 server a, 4 server b),
// run by f, its log in logs.
func psConfig(t *testing.T, f *fakeSpawner, logs *testutil.SyncBuffer) Config {
	cfg := fakeConfig(t, f, "a:2,b:2", 2, &testutil.SyncBuffer{})
	cfg.PS = 2
	cfg.GracePeriod = 300 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return cfg
}

// TestLaunchPSWorkerFailureGoesOn: a worker that dies is logged and the
// job goes on; it succeeds once the chief and the servers exit 0.
func TestLaunchPSWorkerFailureGoesOn(t *testing.T) {
	f := newFakeSpawner(t)
	var logs testutil.SyncBuffer
	errc := launchAsync(t.Context(), psConfig(t, f, &logs))
	f.waitSpawned(5)
	f.proc(2).Kill()
	const warn = "gorun: worker 1 (rank 2) on b was killed by SIGKILL: the chief re-runs its steps on the other workers"
	waitFor(t, "the worker's warning", func() bool { return strings.Contains(logs.String(), warn) })
	for _, r := range []int{0, 1, 3, 4} {
		if signals, _, _ := f.proc(r).record(); len(signals) != 0 {
			t.Errorf("rank %d got %s after a worker died", r, fmtSignals(signals))
		}
	}
	f.proc(0).exit(0)
	for _, r := range []int{1, 3, 4} { // before gorun may have taken in the chief's exit: servers end as it does
		f.proc(r).exit(0)
	}
	if err := await(t, errc, 10*time.Second); err != nil {
		t.Fatalf("Launch = %v, want nil\n%s", err, logs.String())
	}
	for r := range 5 {
		if signals, _, _ := f.proc(r).record(); len(signals) != 0 {
			t.Errorf("rank %d got %s", r, fmtSignals(signals))
		}
	}
}

// TestLaunchPSServerDeathStopsTheJob: a server that dies before the chief
// ends stops the job, which names it.
func TestLaunchPSServerDeathStopsTheJob(t *testing.T) {
	f := newFakeSpawner(t)
	var logs testutil.SyncBuffer
	errc := launchAsync(t.Context(), psConfig(t, f, &logs))
	f.waitSpawned(5)
	f.proc(4).Kill()
	err := await(t, errc, 10*time.Second)
	const want = "runner: parameter server 1 (rank 4) on b was killed by SIGKILL before the chief ended; stopped the other 4 ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
	if te, ok := errors.AsType[*TaskError](err); !ok || te.Role != jobenv.RolePS || te.Index != 1 || te.Rank != 4 {
		t.Errorf("error %v: want a *TaskError of server 1", err)
	}
	for _, r := range []int{0, 1, 2, 3} {
		if signals, _, _ := f.proc(r).record(); !slices.Equal(signals, []os.Signal{syscall.SIGTERM}) {
			t.Errorf("rank %d got %s, want SIGTERM", r, fmtSignals(signals))
		}
	}
}

// TestLaunchPSServerExitZeroEarly: a server that exits 0 while the chief
// still runs fails the job too.
func TestLaunchPSServerExitZeroEarly(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), psConfig(t, f, &testutil.SyncBuffer{}))
	f.waitSpawned(5)
	start := time.Now()
	f.proc(3).exit(0)
	err := await(t, errc, 10*time.Second)
	const want = "runner: parameter server 0 (rank 3) on a exited with status 0 before the chief ended (which still ran 300ms later); stopped the other 4 ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the job failed %v after the server exited, before the grace period", d)
	}
}

// TestLaunchPSChiefFails: a chief that exits non-zero stops the job, which
// names it and exits with its status.
func TestLaunchPSChiefFails(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), psConfig(t, f, &testutil.SyncBuffer{}))
	f.waitSpawned(5)
	f.proc(0).exit(3)
	err := await(t, errc, 10*time.Second)
	const want = "runner: chief (rank 0) on a exited with status 3; stopped the other 4 ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
	if ee := exitErrorOf(t, err); ee.Status != 3 {
		t.Errorf("status %d, want 3", ee.Status)
	}
}

// TestLaunchPSChiefReportsSilentServer: a chief that fails after
// reporting that a server stopped answering it (as ps.Run does) makes the
// job name that server, and the server, still running, is killed at once.
func TestLaunchPSChiefReportsSilentServer(t *testing.T) {
	f := newFakeSpawner(t)
	f.ignore[4] = true // frozen: it ignores SIGTERM
	errc := launchAsync(t.Context(), psConfig(t, f, &testutil.SyncBuffer{}))
	f.waitSpawned(5)
	reportAs(t, f, 0, jobenv.SilentBecause([]int{4}, 10*time.Second))
	f.proc(0).exit(1)
	err := await(t, errc, 10*time.Second)
	const want = "runner: rank 4 on b stopped answering (no answer within 10s, reported by rank 0); killed it"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Launch = %v, want it to begin %q", err, want)
	}
	if ue, ok := errors.AsType[*UnresponsiveError](err); !ok || ue.Rank != 4 || ue.Exit != nil {
		t.Errorf("error %v: want an *UnresponsiveError naming rank 4, still running", err)
	}
	if signals, _, killAt := f.proc(4).record(); killAt.IsZero() || slices.Contains(signals, os.Signal(syscall.SIGTERM)) {
		t.Errorf("the silent server got %s and Kill at %v, want Kill and no SIGTERM", fmtSignals(signals), killAt)
	}
}

// TestLaunchPSChiefReportsAWorker: a silent report that names no server
// (a worker) leaves the blame on the chief.
func TestLaunchPSChiefReportsAWorker(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), psConfig(t, f, &testutil.SyncBuffer{}))
	f.waitSpawned(5)
	reportAs(t, f, 0, jobenv.SilentBecause([]int{2}, 10*time.Second))
	f.proc(0).exit(3)
	err := await(t, errc, 10*time.Second)
	const want = "runner: chief (rank 0) on a exited with status 3; stopped the other 4 ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
}

// TestLaunchPSWorkerReportsSilentChief: a worker that fails after
// reporting that the chief stopped answering it (as ps.Run does) ends the
// job naming the chief, which is killed at once: a frozen chief would
// otherwise hold the job forever.
func TestLaunchPSWorkerReportsSilentChief(t *testing.T) {
	f := newFakeSpawner(t)
	f.ignore[0] = true // frozen: it ignores SIGTERM
	errc := launchAsync(t.Context(), psConfig(t, f, &testutil.SyncBuffer{}))
	f.waitSpawned(5)
	reportAs(t, f, 2, jobenv.SilentBecause([]int{0}, 10*time.Second))
	f.proc(2).exit(1)
	err := await(t, errc, 10*time.Second)
	const want = "runner: rank 0 on a stopped answering (no answer within 10s, reported by rank 2); killed it"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Launch = %v, want it to begin %q", err, want)
	}
	if signals, _, killAt := f.proc(0).record(); killAt.IsZero() || slices.Contains(signals, os.Signal(syscall.SIGTERM)) {
		t.Errorf("the silent chief got %s and Kill at %v, want Kill and no SIGTERM", fmtSignals(signals), killAt)
	}
}

// TestLaunchPSServerOutlivesChief: after the chief exits 0, a server
// still running after the grace period is stopped and fails the job; a
// worker still running is stopped without failing it.
func TestLaunchPSServerOutlivesChief(t *testing.T) {
	f := newFakeSpawner(t)
	var logs testutil.SyncBuffer
	errc := launchAsync(t.Context(), psConfig(t, f, &logs))
	f.waitSpawned(5)
	for _, r := range []int{2, 4} {
		f.proc(r).exit(0)
	}
	f.proc(0).exit(0) // worker 0 (rank 1) and server 0 (rank 3) never exit on their own
	err := await(t, errc, 10*time.Second)
	const want = "runner: parameter server 0 (rank 3) on a still running 300ms after the chief ended; stopped"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q\n%s", err, want, logs.String())
	}
	for _, r := range []int{1, 3} {
		if signals, _, _ := f.proc(r).record(); !slices.Equal(signals, []os.Signal{syscall.SIGTERM}) {
			t.Errorf("rank %d got %s, want SIGTERM", r, fmtSignals(signals))
		}
	}
	if !strings.Contains(logs.String(), "worker 0 (rank 1) on a still running 300ms after the chief ended; stopped") {
		t.Errorf("no warning about the worker:\n%s", logs.String())
	}
}

// TestLaunchPSEvaluator: the evaluator runs the program once more on the
// first host with GOROVOD_ROLE=evaluator and no rank; after the chief it
// may run for --evaluator-timeout, then gets SIGTERM, and exiting 0 on it
// is success. Every rank has GOROVOD_PS_SERVERS.
func TestLaunchPSEvaluator(t *testing.T) {
	f := newFakeSpawner(t)
	const eval = 5 // the evaluator's index, after the 5 ranks
	f.onSignal = func(p *fakeProc, sig os.Signal) {
		if p.slot.Rank == eval && sig == syscall.SIGTERM {
			p.exit(0) // as evaluator.Run does
		}
	}
	var logs testutil.SyncBuffer
	cfg := psConfig(t, f, &logs)
	cfg.Evaluator, cfg.EvaluatorTimeout = true, 200*time.Millisecond
	errc := launchAsync(t.Context(), cfg)
	f.waitSpawned(6)
	for r := range 5 {
		if !slices.Contains(f.cmd(r).Env, jobenv.EnvPSServers+"=2") {
			t.Errorf("rank %d lacks %s=2", r, jobenv.EnvPSServers)
		}
	}
	env := f.cmd(eval).Env
	if !slices.Contains(env, jobenv.EnvRole+"=evaluator") || !slices.Contains(env, jobenv.EnvHostname+"=a") ||
		!slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, jobenv.EnvSecret+"=") && len(kv) > 20 }) {
		t.Errorf("evaluator environment %q: want the role, host a and the secret", jobenv.RedactEnviron(env))
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, jobenv.EnvRank+"=") }) {
		t.Errorf("the evaluator has a rank: %q", jobenv.RedactEnviron(env))
	}
	if h := f.proc(eval).slot.Host; h != "a" {
		t.Errorf("evaluator on %s, want a", h)
	}
	for r := range 5 {
		f.proc(r).exit(0)
	}
	if err := await(t, errc, 10*time.Second); err != nil {
		t.Fatalf("Launch = %v\n%s", err, logs.String())
	}
	_, termAt, _ := f.proc(eval).record()
	if termAt.IsZero() {
		t.Error("the evaluator got no SIGTERM")
	}
}

// TestLaunchPSEvaluatorFails: an evaluator that fails fails the job,
// without stopping the training.
func TestLaunchPSEvaluatorFails(t *testing.T) {
	f := newFakeSpawner(t)
	var logs testutil.SyncBuffer
	cfg := psConfig(t, f, &logs)
	cfg.Evaluator = true
	errc := launchAsync(t.Context(), cfg)
	f.waitSpawned(6)
	f.proc(5).exit(2)
	waitFor(t, "the evaluator's warning", func() bool { return strings.Contains(logs.String(), "gorun: evaluator on a exited with status 2") })
	for r := range 5 {
		if signals, _, _ := f.proc(r).record(); len(signals) != 0 {
			t.Errorf("rank %d got %s after the evaluator failed", r, fmtSignals(signals))
		}
		f.proc(r).exit(0)
	}
	err := await(t, errc, 10*time.Second)
	if err == nil || err.Error() != "runner: evaluator on a exited with status 2" {
		t.Fatalf("Launch = %v", err)
	}
}

// TestLaunchPSLocalProcesses: real processes see their roles' variables.
func TestLaunchPSLocalProcesses(t *testing.T) {
	var stdout testutil.SyncBuffer
	cfg := DefaultConfig()
	cfg.NP, cfg.PS, cfg.Evaluator = 2, 1, true
	cfg.Command = []string{"sh", "-c", `echo "rank ${GOROVOD_RANK:-none} of ${GOROVOD_SIZE:-none} ps ${GOROVOD_PS_SERVERS:-none} role ${GOROVOD_ROLE:-none}"
		[ "$GOROVOD_RANK" = 0 ] || sleep 0.5`} // the others end after the chief, as it tells them to
	cfg.GracePeriod = 10 * time.Second
	cfg.Stdout, cfg.Stderr = &stdout, &stdout
	cfg.OutputDir = t.TempDir()
	if err := await(t, launchAsync(t.Context(), cfg), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.OutputDir, "evaluator", "stdout")); err != nil || string(b) != "rank none of none ps none role evaluator\n" {
		t.Errorf("DIR/evaluator/stdout: %q, %v", b, err)
	}
	checkLines(t, "stdout", stdout.String(), []string{
		"[0]<stdout>: rank 0 of 4 ps 1 role none",
		"[1]<stdout>: rank 1 of 4 ps 1 role none",
		"[2]<stdout>: rank 2 of 4 ps 1 role none",
		"[3]<stdout>: rank 3 of 4 ps 1 role none",
		"[evaluator]<stdout>: rank none of none ps none role evaluator",
	})
}

// TestLaunchPSBlamesServerOverChief: a chief that fails because a server
// died is not blamed even when gorun takes in its exit first: the server,
// which dies within the blame window, is.
func TestLaunchPSBlamesServerOverChief(t *testing.T) {
	f := newFakeSpawner(t)
	var logs testutil.SyncBuffer
	errc := launchAsync(t.Context(), psConfig(t, f, &logs))
	f.waitSpawned(5)
	f.proc(0).exit(1)
	waitFor(t, "gorun to take in the chief's exit", func() bool { return strings.Contains(logs.String(), "gorun: the chief failed") })
	f.proc(3).Kill()
	err := await(t, errc, 10*time.Second)
	const want = "runner: parameter server 0 (rank 3) on a was killed by SIGKILL before the chief ended; stopped the other 3 ranks"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
}

// TestLaunchPSEvaluatorKilledBySIGTERM: an evaluator that dies of the
// SIGTERM --evaluator-timeout sends, instead of exiting 0, fails the job.
func TestLaunchPSEvaluatorKilledBySIGTERM(t *testing.T) {
	f := newFakeSpawner(t)
	cfg := psConfig(t, f, &testutil.SyncBuffer{})
	cfg.Evaluator, cfg.EvaluatorTimeout = true, 100*time.Millisecond
	errc := launchAsync(t.Context(), cfg)
	f.waitSpawned(6)
	for r := range 5 {
		f.proc(r).exit(0)
	}
	err := await(t, errc, 10*time.Second)
	const want = "runner: evaluator on a was killed by SIGTERM (it got SIGTERM 100ms after the chief ended, --evaluator-timeout, and must then exit 0)"
	if err == nil || err.Error() != want {
		t.Fatalf("Launch = %v, want %q", err, want)
	}
}

// TestLaunchClearsStaleRoleVars: GOROVOD_PS_SERVERS and GOROVOD_ROLE left
// in gorun's environment (exported for an srun job, say) reach no rank of
// an all-reduce job, which local ranks would otherwise inherit, making
// every rank a parameter-server task or the evaluator.
func TestLaunchClearsStaleRoleVars(t *testing.T) {
	t.Setenv(jobenv.EnvPSServers, "3")
	t.Setenv(jobenv.EnvRole, jobenv.RoleEvaluator)
	var stdout testutil.SyncBuffer
	cfg := DefaultConfig()
	cfg.NP = 2
	cfg.Command = []string{"sh", "-c", `echo "ps=[$GOROVOD_PS_SERVERS] role=[$GOROVOD_ROLE]"`}
	cfg.Stdout, cfg.Stderr = &stdout, &stdout
	if err := await(t, launchAsync(t.Context(), cfg), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "stdout", stdout.String(), []string{"[0]<stdout>: ps=[] role=[]", "[1]<stdout>: ps=[] role=[]"})
}
