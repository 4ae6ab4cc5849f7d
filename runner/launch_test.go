package runner

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

func TestLaunchAllSucceed(t *testing.T) {
	f := newFakeSpawner(t)
	for r := range 4 {
		f.exitNow[r] = 0
	}
	err := await(t, launchAsync(t.Context(), fakeConfig(t, f, "a:2,b:2", 4, &testutil.SyncBuffer{})), 5*time.Second)
	if err != nil {
		t.Fatalf("Launch = %v, want nil", err)
	}
	for r := range 4 {
		if f.proc(r) == nil {
			t.Errorf("rank %d was not started", r)
		}
	}
}

func TestLaunchEnvMatchesSlot(t *testing.T) {
	t.Setenv("GORUN_TEST_FORWARDED", "from-gorun")
	f := newFakeSpawner(t)
	for r := range 3 {
		f.exitNow[r] = 0
	}
	cfg := fakeConfig(t, f, "a:1,b:2", 3, &testutil.SyncBuffer{})
	cfg.ForwardEnv = []string{"GORUN_TEST_FORWARDED", "GORUN_TEST_SET=x", "GORUN_TEST_UNSET"}
	cfg.FusionThreshold, cfg.CycleTime, cfg.CacheCapacity = 1234, 5*time.Millisecond, 7
	cfg.LogLevel, cfg.TimelinePath, cfg.OpTimeout = "debug", "/tmp/tl.json", time.Minute
	if err := await(t, launchAsync(t.Context(), cfg), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	slots, _ := Assign(cfg.Hosts, 3)
	cwd, _ := os.Getwd()
	var secret []byte
	for _, s := range slots {
		c := f.cmd(s.Rank)
		if !slices.Equal(c.Argv, cfg.Command) || c.Dir != cwd {
			t.Errorf("rank %d: argv %q dir %q, want %q in %q", s.Rank, c.Argv, c.Dir, cfg.Command, cwd)
		}
		env := environOf(t, c.Env)
		if env.Rank != s.Rank || env.Size != 3 || env.LocalRank != s.LocalRank || env.LocalSize != s.LocalSize ||
			env.CrossRank != s.CrossRank || env.CrossSize != s.CrossSize || env.Hostname != s.Host {
			t.Errorf("rank %d: env %v does not match slot %+v", s.Rank, env, s)
		}
		if host, _, err := net.SplitHostPort(env.RendezvousAddr); err != nil || host != "127.0.0.1" {
			t.Errorf("rank %d: rendezvous address %q, want 127.0.0.1:port", s.Rank, env.RendezvousAddr)
		}
		if len(env.Secret) != auth.SecretSize || secret != nil && !bytes.Equal(env.Secret, secret) {
			t.Errorf("rank %d: secret of %d bytes, or not the job's", s.Rank, len(env.Secret))
		}
		secret = env.Secret
		if env.FusionThreshold != 1234 || env.CycleTime != 5*time.Millisecond || env.CacheCapacity != 7 ||
			env.LogLevel != "debug" || env.TimelinePath != "/tmp/tl.json" || env.OpTimeout != time.Minute {
			t.Errorf("rank %d: knobs not passed through: %v", s.Rank, env)
		}
		for _, want := range []string{"GORUN_TEST_FORWARDED=from-gorun", "GORUN_TEST_SET=x"} {
			if !slices.Contains(c.Env, want) {
				t.Errorf("rank %d: env lacks %s", s.Rank, want)
			}
		}
		if slices.ContainsFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "GORUN_TEST_UNSET") }) {
			t.Errorf("rank %d: an unset -x variable was forwarded", s.Rank)
		}
	}
}

// environOf reads a worker's environment from "NAME=value" entries.
func environOf(t *testing.T, kv []string) jobenv.Env {
	t.Helper()
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	env, present, err := jobenv.FromEnviron(func(k string) string { return m[k] })
	if err != nil || !present {
		t.Fatalf("FromEnviron: present %v, %v", present, err)
	}
	return env
}

func TestLaunchVerboseLogHasNoSecret(t *testing.T) {
	f := newFakeSpawner(t)
	f.exitNow[0], f.exitNow[1] = 0, 0
	var logs testutil.SyncBuffer
	cfg := fakeConfig(t, f, "a:2", 2, &testutil.SyncBuffer{})
	cfg.Verbose = true
	cfg.ForwardEnv = []string{"GORUN_TEST_TOKEN=hunter2"}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := await(t, launchAsync(t.Context(), cfg), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	secret := environOf(t, f.cmd(0).Env).Secret
	got := logs.String()
	for _, want := range []string{"gorun: slot", "gorun: spawn", "GOROVOD_RANK=1", "GOROVOD_SECRET=<redacted>", "train"} {
		if !strings.Contains(got, want) {
			t.Errorf("verbose log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(strings.ToLower(got), hex.EncodeToString(secret)) {
		t.Errorf("verbose log holds the secret:\n%s", got)
	}
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "GORUN_TEST_TOKEN") {
		t.Errorf("verbose log should name -x variables without their values:\n%s", got)
	}
}

func TestLaunchFirstFailureStopsOthers(t *testing.T) {
	f := newFakeSpawner(t)
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:2,b:2", 4, &testutil.SyncBuffer{}))
	f.waitSpawned(4)
	start := time.Now()
	f.proc(2).exit(3)
	err := await(t, errc, 5*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Launch took %v after the failure, want < 5s", d)
	}
	ee := exitErrorOf(t, err)
	if ee.Rank != 2 || ee.Host != "b" || ee.Status != 3 {
		t.Errorf("ExitError = %+v, want rank 2 on b, status 3", ee)
	}
	const want = "runner: rank 2 on b exited with status 3; stopped the other 3 ranks"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	for _, r := range []int{0, 1, 3} {
		signals, _, killAt := f.proc(r).record()
		if !slices.Equal(signals, []os.Signal{syscall.SIGTERM}) || !killAt.IsZero() {
			t.Errorf("rank %d got signals %s, killed %v; want SIGTERM only", r, fmtSignals(signals), !killAt.IsZero())
		}
	}
	if signals, _, _ := f.proc(2).record(); len(signals) != 0 {
		t.Errorf("the failed rank got signals %s", fmtSignals(signals))
	}
}

func TestLaunchKillsRankThatIgnoresTerm(t *testing.T) {
	f := newFakeSpawner(t)
	f.ignore[1] = true
	cfg := fakeConfig(t, f, "a:3", 3, &testutil.SyncBuffer{})
	cfg.GracePeriod = 200 * time.Millisecond
	errc := launchAsync(t.Context(), cfg)
	f.waitSpawned(3)
	f.proc(0).exit(1)
	err := await(t, errc, 5*time.Second)
	if ee := exitErrorOf(t, err); ee.Rank != 0 || ee.Status != 1 {
		t.Errorf("ExitError = %+v, want rank 0 status 1", ee)
	}
	if !strings.Contains(err.Error(), "stopped the other 2 ranks (1 with SIGKILL after the 200ms grace period)") {
		t.Errorf("error = %q, want it to say one rank was killed", err)
	}
	_, termAt, killAt := f.proc(1).record()
	if termAt.IsZero() || killAt.IsZero() || killAt.Sub(termAt) < cfg.GracePeriod {
		t.Errorf("rank 1: SIGTERM at %v, SIGKILL at %v; want SIGKILL a grace period after SIGTERM", termAt, killAt)
	}
	if _, _, killAt := f.proc(2).record(); !killAt.IsZero() {
		t.Errorf("rank 2 obeyed SIGTERM but was killed")
	}
}

func TestLaunchContextCancelStopsAll(t *testing.T) {
	f := newFakeSpawner(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := launchAsync(ctx, fakeConfig(t, f, "a:2,b:1", 3, &testutil.SyncBuffer{}))
	f.waitSpawned(3)
	cancel()
	err := await(t, errc, 5*time.Second)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch = %v, want ErrInterrupted and context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "stopped 3 running ranks") {
		t.Errorf("error = %q, want it to count the stopped ranks", err)
	}
	for r := range 3 {
		if signals, _, _ := f.proc(r).record(); !slices.Equal(signals, []os.Signal{syscall.SIGTERM}) {
			t.Errorf("rank %d got %s, want SIGTERM", r, fmtSignals(signals))
		}
	}
}

func TestLaunchCanceledBeforeStart(t *testing.T) {
	f := newFakeSpawner(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := await(t, launchAsync(ctx, fakeConfig(t, f, "a:2", 2, &testutil.SyncBuffer{})), 5*time.Second)
	if !errors.Is(err, ErrInterrupted) || f.proc(0) != nil {
		t.Errorf("Launch = %v (rank 0 started: %v), want ErrInterrupted and no rank", err, f.proc(0) != nil)
	}
}

func TestLaunchSpawnFailureStopsStarted(t *testing.T) {
	f := newFakeSpawner(t)
	f.failAt[1] = errNoStart
	err := await(t, launchAsync(t.Context(), fakeConfig(t, f, "a:1,b:2", 3, &testutil.SyncBuffer{})), 5*time.Second)
	if !errors.Is(err, errNoStart) {
		t.Fatalf("Launch = %v, want the spawn error", err)
	}
	if want := errNoStart.Error() + "; stopped the other rank"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if signals, _, _ := f.proc(0).record(); !slices.Equal(signals, []os.Signal{syscall.SIGTERM}) {
		t.Errorf("rank 0 got %s, want SIGTERM", fmtSignals(signals))
	}
	if f.proc(2) != nil {
		t.Errorf("rank 2 was started after rank 1 failed to start")
	}
}

func TestLaunchAbortsRendezvous(t *testing.T) {
	f := newFakeSpawner(t)
	var pingErr error
	f.onSignal = func(p *fakeProc, sig os.Signal) { // rank 0 asks the rendezvous when told to stop
		if p.slot.Rank != 0 {
			return
		}
		env := environOf(t, f.cmd(0).Env)
		c, err := rendezvous.Dial(t.Context(), env.RendezvousAddr, env.Secret)
		if err != nil {
			pingErr = err
			return
		}
		defer c.Close()
		pingErr = c.Ping(t.Context())
	}
	errc := launchAsync(t.Context(), fakeConfig(t, f, "a:2", 2, &testutil.SyncBuffer{}))
	f.waitSpawned(2)
	f.proc(1).exit(7)
	if err := await(t, errc, 5*time.Second); exitErrorOf(t, err).Status != 7 {
		t.Fatalf("Launch = %v, want rank 1's status 7", err)
	}
	if !errors.Is(pingErr, rendezvous.ErrAborted) || !strings.Contains(pingErr.Error(), "rank 1 on a exited with status 7") {
		t.Errorf("rank 0's Ping after the failure = %v, want ErrAborted naming rank 1", pingErr)
	}
}

func TestLaunchOutputPrefixAndFiles(t *testing.T) {
	f := newFakeSpawner(t)
	f.stdout[0], f.stderr[0] = "hello\nworld\n", ""
	f.stdout[1], f.stderr[1] = "one\n", "oops\npartial"
	f.exitNow[0], f.exitNow[1] = 0, 0
	var stdout, stderr testutil.SyncBuffer
	cfg := fakeConfig(t, f, "a:2", 2, nil)
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	cfg.OutputDir = filepath.Join(t.TempDir(), "out")
	if err := await(t, launchAsync(t.Context(), cfg), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	wantOut := []string{"[0]<stdout>: hello", "[0]<stdout>: world", "[1]<stdout>: one"}
	wantErr := []string{"[1]<stderr>: oops", "[1]<stderr>: partial"}
	checkLines(t, "stdout", stdout.String(), wantOut)
	checkLines(t, "stderr", stderr.String(), wantErr)
	files := map[string]string{
		"rank.00/stdout": "hello\nworld\n", "rank.00/stderr": "",
		"rank.01/stdout": "one\n", "rank.01/stderr": "oops\npartial",
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(cfg.OutputDir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

// checkLines checks that text is exactly the lines of want, in any order.
func checkLines(t *testing.T, name, text string, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s lines = %q, want %q", name, got, want)
	}
}

func TestLaunchRejectsBadConfigBeforeStarting(t *testing.T) {
	f := newFakeSpawner(t)
	cfg := fakeConfig(t, f, "a:4", 5, &testutil.SyncBuffer{})
	err := Launch(t.Context(), cfg)
	if !errors.Is(err, ErrSlots) || !strings.Contains(err.Error(), "-np 5") || !strings.Contains(err.Error(), "4 slots") {
		t.Errorf("Launch = %v, want ErrSlots naming 5 and 4", err)
	}
	if f.proc(0) != nil {
		t.Errorf("a rank was started")
	}
}

func TestLaunchLocalProcesses(t *testing.T) {
	var stdout testutil.SyncBuffer
	cfg := DefaultConfig()
	cfg.NP = 3
	cfg.Command = []string{"sh", "-c", `echo "rank $GOROVOD_RANK of $GOROVOD_SIZE, local $GOROVOD_LOCAL_RANK"`}
	cfg.Stdout, cfg.Stderr = &stdout, &stdout
	if err := await(t, launchAsync(t.Context(), cfg), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "stdout", stdout.String(), []string{
		"[0]<stdout>: rank 0 of 3, local 0",
		"[1]<stdout>: rank 1 of 3, local 1",
		"[2]<stdout>: rank 2 of 3, local 2",
	})
}

func TestLaunchLocalFailure(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NP = 3
	cfg.Command = []string{"sh", "-c", `[ "$GOROVOD_RANK" = 1 ] && exit 4; exec sleep 60`}
	cfg.Stdout, cfg.Stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	start := time.Now()
	err := await(t, launchAsync(t.Context(), cfg), 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Launch took %v, want < 5s", d)
	}
	const want = "runner: rank 1 on localhost exited with status 4; stopped the other 2 ranks"
	if err == nil || err.Error() != want {
		t.Errorf("Launch = %v, want %q", err, want)
	}
}

func TestLaunchLocalKillsRankThatIgnoresTerm(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.NP = 2
	cfg.GracePeriod = 300 * time.Millisecond
	cfg.Command = []string{"sh", "-c", `pid=` + dir + `/pid
		if [ "$GOROVOD_RANK" = 0 ]; then while [ ! -s $pid ]; do sleep 0.01; done; exit 9; fi
		trap "" TERM; echo $$ > $pid.tmp; mv $pid.tmp $pid; sleep 60`}
	cfg.Stdout, cfg.Stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	start := time.Now()
	err := await(t, launchAsync(t.Context(), cfg), 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Launch took %v, want < 5s", d)
	}
	if ee := exitErrorOf(t, err); ee.Rank != 0 || ee.Status != 9 {
		t.Errorf("ExitError = %+v, want rank 0 status 9", ee)
	}
	if !strings.Contains(err.Error(), "stopped the other rank (1 with SIGKILL after the 300ms grace period)") {
		t.Errorf("error = %q, want rank 1 killed after the grace period", err)
	}
	if b, rerr := os.ReadFile(filepath.Join(dir, "pid")); rerr == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		waitFor(t, "rank 1 to be gone", func() bool { return !alive(pid) })
	}
}
