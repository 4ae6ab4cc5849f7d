package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
)

// lockedBuffer is a buffer safe for writers and a reader at once, which
// a test can wait on.
type lockedBuffer struct{ testutil.SyncBuffer }

// waitFor waits up to d until b holds s.
func (l *lockedBuffer) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v:\n%s", s, d, l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeScript writes an executable shell script of body into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostsFile returns a discovery script that prints the file it returns,
// which holds hosts at first.
func hostsFile(t *testing.T, hosts string) (script, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "hosts")
	setHosts(t, file, hosts)
	return writeScript(t, dir, "discover", "cat "+file+"\n"), file
}

func setHosts(t *testing.T, file, hosts string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
}

// elasticConfig is an elastic job of np fake ranks (at least minNP), its
// hosts from script (or localhost:np without one), its ranks' output to
// out and gorun's log, at every level, to log.
func elasticConfig(t *testing.T, f *fakeSpawner, script string, np, minNP int, out, log io.Writer) Config {
	t.Helper()
	cfg := fakeConfig(t, f, "localhost:"+strconv.Itoa(np), np, out)
	if script != "" {
		cfg.Hosts, cfg.DiscoveryScript = nil, script
	}
	cfg.MinNP = minNP
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return cfg
}

// TestElasticNoHostsLeft: every host leaves the discovered list mid-run;
// gorun stops every rank, and with none running still waits the whole
// --elastic-timeout for hosts, then fails saying that none came back. The
// job must never end successfully without its program having finished.
func TestElasticNoHostsLeft(t *testing.T) {
	f := newFakeSpawner(t)
	script, file := hostsFile(t, "localhost:2\n")
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, script, 2, 2, &out, &log)
	cfg.ElasticTimeout = 2 * time.Second
	errc := launchAsync(context.Background(), cfg)
	f.waitSpawned(2)
	emptied := time.Now()
	setHosts(t, file, "")
	err := await(t, errc, 30*time.Second)
	waited := time.Since(emptied)
	if !errors.Is(err, ErrElasticTimeout) || !strings.Contains(err.Error(), "has 0; the discovery script's hosts: none (no host came back within the timeout)") {
		t.Fatalf("Launch: %v, want ErrElasticTimeout saying no host came back\n%s", err, log.String())
	}
	if waited < cfg.ElasticTimeout {
		t.Errorf("Launch returned %v after the hosts left, before the elastic timeout of %v", waited, cfg.ElasticTimeout)
	}
	for r := range 2 {
		if sigs, _, _ := f.proc(r).record(); fmtSignals(sigs) != "[terminated]" {
			t.Errorf("rank %d got %v, want SIGTERM", r, sigs)
		}
	}
	if !strings.Contains(log.String(), `level=INFO msg="gorun: host left the discovered list; stopping its rank"`) {
		t.Errorf("a host leaving is not logged at INFO:\n%s", log.String())
	}
	t.Logf("Launch failed %v after the hosts left (timeout %v)", waited.Round(time.Millisecond), cfg.ElasticTimeout)
}

// TestElasticHostsComeBack: every host leaves the list, every rank is
// stopped, and the hosts come back within --elastic-timeout: the job
// forms anew on new ranks, whose output shows their rank in the new
// generation, and succeeds when they finish.
func TestElasticHostsComeBack(t *testing.T) {
	f := newFakeSpawner(t)
	script, file := hostsFile(t, "localhost:2\n")
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, script, 2, 2, &out, &log)
	cfg.ElasticTimeout = time.Minute
	errc := launchAsync(context.Background(), cfg)
	f.waitSpawned(2)
	setHosts(t, file, "")
	log.waitFor(t, "waiting for hosts", 30*time.Second)
	setHosts(t, file, "localhost:2\n")
	f.waitSpawned(2)
	log.waitFor(t, "generation=2 size=2", 30*time.Second)
	for r := 2; r < 4; r++ {
		p := f.proc(r)
		_, _ = io.WriteString(p.stdout, "trained by launch index "+strconv.Itoa(r)+"\n")
		p.exit(0)
	}
	if err := await(t, errc, 30*time.Second); err != nil {
		t.Fatalf("Launch: %v\n%s", err, log.String())
	}
	for _, want := range []string{"[0]<stdout>: trained by launch index 2", "[1]<stdout>: trained by launch index 3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
}

// TestElasticOutputShowsCurrentRank: rank 0 of three fails; the two left
// form generation 2, where launch indexes 1 and 2 are ranks 0 and 1, and
// their output says so from then on. A normal formation is logged at
// INFO, the failure at WARN.
func TestElasticOutputShowsCurrentRank(t *testing.T) {
	f := newFakeSpawner(t)
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, "", 3, 2, &out, &log)
	errc := launchAsync(context.Background(), cfg)
	f.waitSpawned(3)
	_, _ = io.WriteString(f.proc(1).stdout, "before\n")
	f.proc(0).exit(1)
	log.waitFor(t, "generation=2 size=2", 30*time.Second)
	_, _ = io.WriteString(f.proc(1).stdout, "after, launched 1\n")
	_, _ = io.WriteString(f.proc(2).stderr, "after, launched 2\n")
	f.proc(1).exit(0)
	f.proc(2).exit(0)
	if err := await(t, errc, 30*time.Second); err != nil {
		t.Fatalf("Launch: %v\n%s", err, log.String())
	}
	for _, want := range []string{"[1]<stdout>: before\n", "[0]<stdout>: after, launched 1\n", "[1]<stderr>: after, launched 2\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
	for _, want := range []string{`level=INFO msg="gorun: elastic job formed" generation=1`, `level=INFO msg="gorun: elastic job formed" generation=2`,
		`level=WARN msg="gorun: ranks of the elastic job failed; the others go on without them"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("no %q in the log:\n%s", want, log.String())
		}
	}
}

// TestDiscoveryFailuresRateLimited: a discovery script failing every
// second is reported once, then at most every discoveryWarnEvery with a
// count, then once when it works again.
func TestDiscoveryFailuresRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f discoveryFailures
	t0 := time.Unix(1000, 0)
	boom := errors.New("boom")
	for s := range 65 { // failures at 0s ... 64s
		f.failed(log, boom, t0.Add(time.Duration(s)*time.Second))
	}
	f.worked(log, t0.Add(65*time.Second))
	f.worked(log, t0.Add(66*time.Second))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`msg="gorun: host discovery failed; keeping the hosts found before" err=boom next_report_within=30s`,
		`msg="gorun: host discovery still fails; keeping the hosts found before" failures=31 for=30s err=boom`,
		`msg="gorun: host discovery still fails; keeping the hosts found before" failures=61 for=1m0s err=boom`,
		`msg="gorun: host discovery works again" failures=65 for=1m5s`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant %s", i, lines[i], w)
		}
	}
}

// pidOf reads the pid that a script wrote to file, waiting for it.
func pidOf(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mustBeGone fails unless process pid ends (or is a zombie) within 5s;
// it kills the process if not.
func mustBeGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d that the discovery script started is still there: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiscoveryChildOfASuccessfulRun: a script that succeeds but leaves a
// child behind (with its output sent elsewhere) does not leave it running:
// the run kills what is left of its process group.
func TestDiscoveryChildOfASuccessfulRun(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := writeScript(t, dir, "detach", "sleep 100 >/dev/null 2>&1 &\necho $! >"+pidFile+"\necho a:1\n")
	hosts, err := DiscoverHosts(context.Background(), script, 1)
	if err != nil || len(hosts) != 1 || hosts[0].Name != "a" {
		t.Fatalf("DiscoverHosts = %v, %v; want host a", hosts, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, pid)
}

// TestDiscoveryBounded: a discovery script that hangs, or that exits but
// leaves a child holding its output open, fails within the bound of one
// run with an error saying so, and its child is killed; one that prints
// more than 1 MiB fails at once naming the limit, while 1 MiB is fine.
func TestDiscoveryBounded(t *testing.T) {
	const bound = time.Second
	old := discoveryTimeout.Load()
	discoveryTimeout.Store(int64(bound))
	t.Cleanup(func() { discoveryTimeout.Store(old) })
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"hangs", "echo a:1\nsleep 100 &\necho $! >" + dir + "/hangs.pid\nwait\n",
			"timed out: it did not finish within 1s, the bound of one run (it was still running)"},
		{"leaves", "echo a:1\nsleep 100 &\necho $! >" + dir + "/leaves.pid\n",
			"timed out: it did not finish within 1s, the bound of one run (it had exited, but a process it started held its output open)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := DiscoverHosts(context.Background(), writeScript(t, dir, c.name, c.body), 1)
			took := time.Since(start)
			if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
			if took < bound || took > bound+4*time.Second {
				t.Errorf("it took %v, want the bound %v (and a little)", took, bound)
			}
			mustBeGone(t, pidOf(t, filepath.Join(dir, c.name+".pid")))
		})
	}
	const longBound = 30 * time.Second
	discoveryTimeout.Store(int64(longBound)) // the limit, not the bound, must stop it
	start := time.Now()
	_, err := DiscoverHosts(context.Background(), writeScript(t, dir, "floods", "yes a:1\n"), 1)
	if want := "it printed more than 1048576 bytes (1 MiB), the limit of its output"; !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), want) {
		t.Errorf("flood: %v, want an error saying %q", err, want)
	}
	if took := time.Since(start); took >= longBound {
		t.Errorf("flood: took %v, want it stopped at the limit, before the bound %v", took, longBound)
	}
	hosts, err := DiscoverHosts(context.Background(), writeScript(t, dir, "full", "yes '#' | head -c 1048576\n"), 1)
	if err != nil || len(hosts) != 0 {
		t.Errorf("1 MiB of comments: %v, %v", hosts, err)
	}
}

// TestElasticDiscoveryChildEndsWithJob: the job is interrupted while the
// discovery script runs mid-job: Launch kills the script and its child
// before it returns.
func TestElasticDiscoveryChildEndsWithJob(t *testing.T) {
	f := newFakeSpawner(t)
	dir := t.TempDir()
	hosts, slow, pidFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "slow"), filepath.Join(dir, "pid")
	setHosts(t, hosts, "localhost:2\n")
	script := writeScript(t, dir, "discover", "if [ -e "+slow+" ]; then sleep 100 & echo $! >"+pidFile+"; wait; fi\ncat "+hosts+"\n")
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, script, 2, 2, &out, &log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := launchAsync(ctx, cfg)
	f.waitSpawned(2)
	setHosts(t, slow, "")
	pid := pidOf(t, pidFile)
	cancel()
	if err := await(t, errc, 30*time.Second); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Launch: %v, want ErrInterrupted", err)
	}
	mustBeGone(t, pid)
}

// TestElasticDiscoveryFailuresLogged: a discovery script that fails run
// after run mid-job is logged once, not once a run, and once more when it
// works again; the job goes on with the hosts found before.
func TestElasticDiscoveryFailuresLogged(t *testing.T) {
	f := newFakeSpawner(t)
	dir := t.TempDir()
	hosts, runs := filepath.Join(dir, "hosts"), filepath.Join(dir, "runs")
	setHosts(t, hosts, "localhost:2\n")
	script := writeScript(t, dir, "discover", "echo >>"+runs+"\ncat "+hosts+" || exit 1\n")
	count := func() int { b, _ := os.ReadFile(runs); return strings.Count(string(b), "\n") }
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, script, 2, 2, &out, &log)
	errc := launchAsync(context.Background(), cfg)
	f.waitSpawned(2)
	if err := os.Remove(hosts); err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, "host discovery failed", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	// Four more starts: a run starts only after the one before it ended, so
	// the first failure and the three runs after it have failed by then
	// (the fourth may still find the hosts restored below).
	for failing := count(); count() < failing+4; {
		if time.Now().After(deadline) {
			t.Fatalf("the discovery script did not start 4 more times within 30s\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	setHosts(t, hosts, "localhost:2\n")
	log.waitFor(t, "host discovery works again", 30*time.Second)
	f.proc(0).exit(0)
	f.proc(1).exit(0)
	if err := await(t, errc, 30*time.Second); err != nil {
		t.Fatalf("Launch: %v\n%s", err, log.String())
	}
	l := log.String()
	if n := strings.Count(l, "level=WARN msg=\"gorun: host discovery"); n != 2 {
		t.Errorf("%d warnings of the discovery script, want 2 (its first failure and its recovery):\n%s", n, l)
	}
	if !regexp.MustCompile(`host discovery works again" failures=([4-9]|\d\d)`).MatchString(l) {
		t.Errorf("the recovery does not count 4 failures or more:\n%s", l)
	}
}

// testElasticJob is an elastic job of two members on host a, started at
// t0, with a fake rendezvous and fake ranks: no discovery script, MinNP 2.
func testElasticJob(t0 time.Time) (*elasticJob, *fakeServer) {
	srv := newFakeServer(2)
	cfg := Config{NP: 2, MinNP: 2, GracePeriod: time.Second, ElasticTimeout: time.Minute}
	cfg.StartTimeout = 10 * time.Second
	j := newJob(cfg, slog.New(slog.DiscardHandler), srv, nil, make([]Slot, 2))
	j.ranks, j.running = fakeRanks(2), 2
	e := &elasticJob{job: j, members: []int{0, 1}, removing: map[int]time.Time{}, banned: map[string]time.Time{},
		hosts: []Host{{Name: "a", Slots: 2}}, alive: newHeartbeats(srv.Value, cfg.StartTimeout, t0)}
	e.alive.started(0, t0)
	e.alive.started(1, t0)
	return e, srv
}

// TestElasticHeartbeats: the controller looks at the heartbeats every
// jobenv.HeartbeatInterval; a member that sent none within the start timeout and
// jobenv.HeartbeatLimit is killed and dropped, and with fewer than MinNP ranks
// left and no discovery script the job stops, naming it.
func TestElasticHeartbeats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e, srv := testElasticJob(t0)
	if !e.due().Equal(t0.Add(jobenv.HeartbeatInterval)) || e.holds() {
		t.Fatalf("due %v, holds %v; want the first look at the heartbeats, not holding", e.due(), e.holds())
	}
	if err := e.tick(t0.Add(jobenv.HeartbeatInterval / 2)); err != nil || !e.alive.next.Equal(t0.Add(jobenv.HeartbeatInterval)) {
		t.Fatalf("an early tick: %v, next look %v", err, e.alive.next)
	}
	beat := func(rank int, n string) { srv.values[jobenv.AliveKey(elasticID("a", rank))] = []byte(n) }
	beat(1, "1")
	if err := e.tick(e.due()); err != nil || !e.alive.beats[1].seen {
		t.Fatalf("first look: %v, rank 1's beat seen %v", err, e.alive.beats[1].seen)
	}
	if want := t0.Add(2 * jobenv.HeartbeatInterval); !e.due().Equal(want) {
		t.Errorf("due %v after a look, want %v", e.due(), want)
	}
	silentAt := t0.Add(jobenv.HeartbeatLimit + e.cfg.StartTimeout)
	beat(1, "2")
	if err := e.tick(silentAt.Add(-time.Millisecond)); err != nil {
		t.Fatalf("rank 0 counted silent before its limit: %v", err)
	}
	beat(1, "3")
	if err := e.tick(silentAt); err != nil {
		t.Fatalf("a tick before the next look looked: %v", err)
	}
	err := e.tick(e.due())
	if err == nil || !strings.Contains(err.Error(), "rank 0 on a sent no sign of life for 15s since it started") ||
		!strings.Contains(err.Error(), "1 rank left, fewer than --min-np 2") {
		t.Fatalf("rank 0 silent: %v", err)
	}
	if _, _, killAt := e.ranks[0].proc.(*fakeProc).record(); killAt.IsZero() || !slices.Equal(e.members, []int{1}) {
		t.Errorf("rank 0 killed %v, members %v; want it killed and dropped", !killAt.IsZero(), e.members)
	}
	if _, _, killAt := e.ranks[1].proc.(*fakeProc).record(); !killAt.IsZero() {
		t.Error("rank 1, beating, was killed")
	}
}

// TestElasticWaitForHosts: a job short of MinNP ranks holds on with no
// rank running, is due at the end of the elastic timeout if that comes
// before the next look at the heartbeats, and then stops with
// ErrElasticTimeout.
func TestElasticWaitForHosts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e, _ := testElasticJob(t0)
	e.short, e.alive.next = t0, t0.Add(2*time.Minute)
	deadline := t0.Add(e.cfg.ElasticTimeout)
	if !e.holds() || !e.due().Equal(deadline) {
		t.Fatalf("holds %v, due %v; want holding, due at %v", e.holds(), e.due(), deadline)
	}
	if err := e.tick(deadline.Add(-time.Millisecond)); err != nil {
		t.Fatalf("stopped before the timeout: %v", err)
	}
	err := e.tick(deadline)
	if !errors.Is(err, ErrElasticTimeout) || !strings.Contains(err.Error(), "waited 1m0s for hosts enough for --min-np 2 ranks, has 2") {
		t.Errorf("at the timeout: %v, want ErrElasticTimeout", err)
	}
	e.short = time.Time{}
	if e.holds() || !e.due().Equal(e.alive.next) {
		t.Errorf("with enough ranks: holds %v, due %v; want not holding, due at the next look", e.holds(), e.due())
	}
}

// TestDiscoverer: the discoverer runs the script, announces each run on
// ready and hands it over with take, a failing run as its error; stop
// ends it while it waits for the job to take a run.
func TestDiscoverer(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	setHosts(t, hosts, "a:2\nb\n")
	d := startDiscoverer(context.Background(), writeScript(t, dir, "discover", "cat "+hosts+"\n"), 3)
	next := func() discovery {
		t.Helper()
		select {
		case <-d.ready:
			return d.take()
		case <-time.After(30 * time.Second):
			t.Fatal("no run of the discovery script within 30s")
			return discovery{}
		}
	}
	if got := next(); got.err != nil || FormatHosts(got.hosts) != "a:2,b:3" {
		t.Errorf("first run: %v, %v; want a:2,b:3", got.hosts, got.err)
	}
	if err := os.Remove(hosts); err != nil {
		t.Fatal(err)
	}
	if got := next(); !errors.Is(got.err, ErrDiscovery) {
		t.Errorf("a failing run: %v, %v; want ErrDiscovery", got.hosts, got.err)
	}
	time.Sleep(2 * discoveryInterval) // not an assertion: a run most likely waits to be taken
	d.stop()
}
