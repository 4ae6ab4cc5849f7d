package launchtest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

// elasticSums is what testdata/elasticrank's final rank 0 prints when
// every sample of its 2 epochs of 600 was processed exactly once.
const elasticSums = "sums 360600 1.443602e+08 1200 after "

// runElastic runs gorun with args on elasticrank, the workers named in die
// killing themselves with SIGKILL after step 20.
func runElastic(t *testing.T, die string, args ...string) result {
	t.Helper()
	argv := append(append([]string{bin(t, "gorun")}, args...), bin(t, "elasticrank"))
	return run(t, command(context.Background(), []string{"ELASTIC_DIE=" + die, "ELASTIC_DIE_STEP=20"}, argv...))
}

var (
	diedAt    = regexp.MustCompile(`dying at (\d+)`)
	firstStep = regexp.MustCompile(`first step of a formation of (\d+) ranks at (\d+)`)
)

// TestElasticRankKilled: gorun -np 4 --min-np 2, and one rank kills itself
// with SIGKILL mid-epoch: the three others form the job anew, roll back
// to their last commit and finish it, every sample processed exactly once
// (the model's sums), the job succeeding. The survivors' first step comes
// within 5 s of the death (measured and logged).
func TestElasticRankKilled(t *testing.T) {
	r := runElastic(t, "localhost/2", "-np", "4", "--min-np", "2")
	mustSucceed(t, "elastic job with a rank killed", r)
	if !strings.Contains(r.stdout, elasticSums) {
		t.Fatalf("no line %q: the samples were not all processed exactly once\n%s", elasticSums, r.stdout)
	}
	if !strings.Contains(r.stderr, "rank 2 on localhost was killed by SIGKILL") || !strings.Contains(r.stderr, "left=3") {
		t.Errorf("gorun did not report the lost rank:\n%s", r.stderr)
	}
	after := recovery(t, r.stdout, "3")
	if after > 5*time.Second {
		t.Fatalf("the survivors' first step came %v after the death, want within 5s\n%s", after, r.stdout)
	}
	t.Logf("from the rank's death to the survivors' first completed step: %v", after)
}

// recovery returns the time from elasticrank's death to the first step
// of a formation of size ranks after it.
func recovery(t *testing.T, stdout, size string) time.Duration {
	t.Helper()
	m := diedAt.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("the rank did not die:\n%s", stdout)
	}
	died, _ := strconv.ParseInt(m[1], 10, 64)
	var after time.Duration = -1
	for _, f := range firstStep.FindAllStringSubmatch(stdout, -1) {
		at, _ := strconv.ParseInt(f[2], 10, 64)
		if f[1] == size && at > died && (after < 0 || time.Duration(at-died) < after) {
			after = time.Duration(at - died)
		}
	}
	if after < 0 {
		t.Fatalf("no first step of %s ranks after the death:\n%s", size, stdout)
	}
	return after
}

// TestElasticTwoLost: two ranks die at once; the other two go on, down to
// --min-np, and finish with every sample processed exactly once.
func TestElasticTwoLost(t *testing.T) {
	r := runElastic(t, "localhost/2,localhost/3", "-np", "4", "--min-np", "2")
	mustSucceed(t, "elastic job with two ranks killed", r)
	if !strings.Contains(r.stdout, elasticSums) {
		t.Fatalf("no line %q\n%s", elasticSums, r.stdout)
	}
}

// TestElasticLimits: losing a rank below --min-np, or more often than
// --reset-limit allows, stops the job with a message that says which.
func TestElasticLimits(t *testing.T) {
	for _, c := range []struct {
		die  string
		args []string
		want string
	}{
		{"localhost/1", []string{"-np", "2", "--min-np", "2"}, "gorun: rank 1 on localhost was killed by SIGKILL; 1 rank left, fewer than --min-np 2"},
		{"localhost/2,localhost/3", []string{"-np", "4", "--min-np", "1", "--reset-limit", "1"},
			"was killed by SIGKILL; the elastic job was formed anew 1 time already (--reset-limit 1)"},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			r := runElastic(t, c.die, c.args...)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, want a failure saying %q\nstderr:\n%s", r.code, c.want, r.stderr)
			}
		})
	}
}

// discoveryScript writes an executable that prints the file it returns
// (initially hosts), for the test to change while gorun runs.
func discoveryScript(t *testing.T, hosts string) (script, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "hosts")
	if err := os.WriteFile(file, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "discover")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat "+file+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, file
}

// TestElasticGrows: the discovery script lists 2 slots, then 4: the job
// of -np 4 starts with 2 ranks, grows to 4 at a commit (gorun --verbose
// logs the new generation's size), and finishes with every sample
// processed exactly once.
func TestElasticGrows(t *testing.T) {
	script, file := discoveryScript(t, "localhost:2\n")
	g := startGorun(t, []string{"ELASTIC_STEP_MS=20"}, bin(t, "gorun"), "--verbose", "-np", "4", "--min-np", "2",
		"--host-discovery-script", script, bin(t, "elasticrank"))
	g.waitFor(t, "first step of a formation of 2 ranks")
	if err := os.WriteFile(file, []byte("localhost:4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, log := g.finish(t)
	if !strings.Contains(out, elasticSums) || !strings.Contains(out, "first step of a formation of 4 ranks") {
		t.Fatalf("the job did not finish at 4 ranks with every sample once:\n%s", out)
	}
	if !strings.Contains(log, "generation=1 size=2") || !strings.Contains(log, "generation=2 size=4") {
		t.Errorf("gorun's log does not show the size going 2 -> 4:\n%s", log)
	}
}

// running is a gorun started in the background.
type running struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.SyncBuffer
	done           chan error
	deadline       <-chan time.Time
}

// startGorun starts argv with env added, its output collected.
func startGorun(t *testing.T, env []string, argv ...string) *running {
	t.Helper()
	r := &running{cmd: command(context.Background(), env, argv...), stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{},
		done: make(chan error, 1), deadline: time.After(runTimeout)}
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() { r.cmd.Process.Kill() })
	return r
}

// waitFor waits until the job's output holds marker.
func (r *running) waitFor(t *testing.T, marker string) {
	t.Helper()
	for !strings.Contains(r.stdout.String(), marker) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("gorun ended (%v) before printing %q\n%s\n%s", err, marker, r.stdout.String(), r.stderr.String())
		case <-r.deadline:
			t.Fatalf("no %q within %v", marker, runTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// finish waits for gorun to succeed and returns its output.
func (r *running) finish(t *testing.T) (stdout, stderr string) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("gorun: %v\n%s\n%s", err, r.stdout.String(), r.stderr.String())
		}
	case <-r.deadline:
		t.Fatalf("gorun did not end within %v\n%s\n%s", runTimeout, r.stdout.String(), r.stderr.String())
	}
	return r.stdout.String(), r.stderr.String()
}

// TestElasticWaitsForHosts: with a discovery script, too few slots for
// --min-np fail the job after --elastic-timeout, at the start and after a
// loss (the host where a rank failed gets no new ranks), with a message
// naming what it waited for and what it saw.
func TestElasticWaitsForHosts(t *testing.T) {
	script, _ := discoveryScript(t, "localhost:1\n")
	r := runElastic(t, "", "-np", "2", "--min-np", "2", "--elastic-timeout", "1s", "--host-discovery-script", script)
	if want := "waited 1s for hosts enough for --min-np 2 ranks; the discovery script lists 1 slot (localhost:1)"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("start: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
	script, _ = discoveryScript(t, "localhost:2\n")
	r = runElastic(t, "localhost/1", "-np", "2", "--min-np", "2", "--elastic-timeout", "1s", "--host-discovery-script", script)
	if want := "waited 1s for hosts enough for --min-np 2 ranks, has 1; the discovery script's hosts: localhost:2 (a rank failed there; no new ranks for"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("after a loss: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho 'node1:x'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runElastic(t, "", "-np", "2", "--host-discovery-script", bad)
	if want := `line 1 "node1:x": slot count "x" is not a positive integer`; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("garbage: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
}

// TestElasticHostsGone: mid-run the discovery script lists no host; gorun
// stops every rank and, with none running, waits for hosts: when none
// come back it fails after --elastic-timeout (not at once, and never with
// status 0), saying so; when they come back within it, the job forms
// anew on them and finishes with status 0.
func TestElasticHostsGone(t *testing.T) {
	const timeout = 4 * time.Second
	argv := func(timeout, script string) []string {
		return []string{bin(t, "gorun"), "-np", "2", "--min-np", "2", "--elastic-timeout", timeout,
			"--host-discovery-script", script, bin(t, "elasticrank")}
	}
	script, file := discoveryScript(t, "localhost:2\n")
	g := startGorun(t, []string{"ELASTIC_STEP_MS=20"}, argv(timeout.String(), script)...)
	g.waitFor(t, "first step of a formation of 2 ranks")
	emptied := time.Now()
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-g.done:
	case <-g.deadline:
		t.Fatalf("gorun did not end within %v\n%s", runTimeout, g.stderr.String())
	}
	waited := time.Since(emptied)
	stderr := g.stderr.String()
	want := "waited 4s for hosts enough for --min-np 2 ranks, has 0; the discovery script's hosts: none (no host came back within the timeout)"
	if err == nil || !strings.Contains(stderr, want) {
		t.Fatalf("gorun: %v, want a failure saying %q\n%s\n%s", err, want, g.stdout.String(), stderr)
	}
	if waited < timeout {
		t.Fatalf("gorun failed %v after the hosts left, before --elastic-timeout %v", waited, timeout)
	}
	t.Logf("gorun failed %v after the hosts left (--elastic-timeout %v): %v", waited.Round(time.Millisecond), timeout, err)

	script, file = discoveryScript(t, "localhost:2\n")
	g = startGorun(t, []string{"ELASTIC_STEP_MS=20"}, argv("2m", script)...)
	g.waitFor(t, "first step of a formation of 2 ranks")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(g.stderr.String(), "waiting for hosts") {
		select {
		case err := <-g.done:
			t.Fatalf("gorun ended (%v) instead of waiting for hosts\n%s", err, g.stderr.String())
		case <-g.deadline:
			t.Fatalf("gorun did not wait for hosts\n%s", g.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.WriteFile(file, []byte("localhost:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := g.finish(t)
	if !strings.Contains(out, elasticSums) {
		t.Fatalf("the job formed anew did not finish with every sample once:\n%s", out)
	}
}

// TestElasticDiscoveryHangs: a discovery script that prints its hosts
// but leaves a child holding its output open fails gorun at the start
// within the 10 s bound of one run (and a little), with a message saying
// that it timed out, and the child does not outlive gorun.
func TestElasticDiscoveryHangs(t *testing.T) {
	dir := t.TempDir()
	pidFile, script := filepath.Join(dir, "pid"), filepath.Join(dir, "discover")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho localhost:2\nsleep 100 &\necho $! >"+pidFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin(t, "gorun") // built before the clock starts
	start := time.Now()
	r := runElastic(t, "", "-np", "2", "--host-discovery-script", script)
	took := time.Since(start)
	want := "timed out: it did not finish within 10s, the bound of one run (it had exited, but a process it started held its output open)"
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
	if took > 20*time.Second {
		t.Errorf("gorun took %v to give up on the script, want the 10s bound and a little", took)
	}
	t.Logf("gorun gave up on the script after %v", took.Round(time.Millisecond))
	b, err := os.ReadFile(pidFile)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		t.Fatalf("the script's child's pid: %q, %v, %v", b, err, perr)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the script's child %d outlived gorun: %s", pid, stat)
		}
	}
}

// shardedBytes is mnist -elastic -shard-state's line at each formation.
var shardedBytes = regexp.MustCompile(`optimizer state sharded: (\d+) bytes on rank 0 of (\d+) ranks`)

// finalAccuracy is mnist's last line.
var finalAccuracy = regexp.MustCompile(`final test accuracy ([\d.]+)% after \d+ epochs on (\d+) rank`)

// TestElasticMnist: examples/mnist -elastic under gorun -np 3 --min-np 2,
// once uninterrupted and once with a rank killed with SIGKILL in the
// second epoch: the second run goes on with 2 ranks from its last commit
// and ends within 1 point of the first's test accuracy; with
// -shard-state too, the survivors re-shard the optimizer state (rank 0
// holds more of it at 2 ranks than at 3).
func TestElasticMnist(t *testing.T) {
	t.Run("replicated", func(t *testing.T) { elasticMnist(t) })
	// Sharded optimizer state: the survivors re-shard it at the new size.
	t.Run("shard-state", func(t *testing.T) { elasticMnist(t, "-shard-state") })
}

func elasticMnist(t *testing.T, extra ...string) {
	args := append([]string{bin(t, "gorun"), "-np", "3", "--min-np", "2", bin(t, "mnist"), "-elastic", "-epochs", "3"}, extra...)
	whole := run(t, command(context.Background(), nil, args...))
	mustSucceed(t, "mnist -elastic", whole)
	g := startGorun(t, nil, args...)
	g.waitFor(t, "epoch 2 [")
	out, err := exec.Command("pgrep", "-P", strconv.Itoa(g.cmd.Process.Pid)).Output()
	ranks := strings.Fields(string(out))
	if err != nil || len(ranks) != 3 {
		t.Fatalf("gorun's ranks: %q, %v", out, err)
	}
	pid, _ := strconv.Atoi(ranks[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := g.finish(t)
	a, b := finalAccuracy.FindStringSubmatch(whole.stdout), finalAccuracy.FindStringSubmatch(stdout)
	if a == nil || b == nil || a[2] != "3" || b[2] != "2" || !strings.Contains(stdout, "the job was formed anew: 2 ranks") {
		t.Fatalf("want 3 ranks to the end, then 2 after the kill:\n%s\n---\n%s\n%s", whole.stdout, stdout, stderr)
	}
	if len(extra) > 0 { // -shard-state: each formation keeps its 1/size part, larger at 2 ranks than at 3
		held := map[string]int{}
		for _, m := range shardedBytes.FindAllStringSubmatch(stdout, -1) {
			held[m[2]], _ = strconv.Atoi(m[1])
		}
		if held["3"] <= 0 || held["2"] <= held["3"] {
			t.Errorf("optimizer state per rank %v (by ranks), want some at 3 and more at 2:\n%s", held, stdout)
		}
	}
	x, _ := strconv.ParseFloat(a[1], 64)
	y, _ := strconv.ParseFloat(b[1], 64)
	t.Logf("test accuracy %.2f%% uninterrupted, %.2f%% with a rank killed", x, y)
	if math.Abs(x-y) > 1 {
		t.Errorf("accuracy %.2f%% with a rank killed, %.2f%% without: more than 1 point apart", y, x)
	}
}

// TestElasticSynthetic: the synthetic benchmark's -elastic mode, a rank
// killed mid-run, reports the reset (how long forming anew and the first
// step took) and the cost of a commit per step.
func TestElasticSynthetic(t *testing.T) {
	g := startGorun(t, nil, bin(t, "gorun"), "-np", "3", "--min-np", "2", bin(t, "synthetic_benchmark"), "-elastic",
		"-model", "uniform", "-params", "1000000", "-tensors", "8", "-step-time", "20ms", "-warmup", "2", "-iters", "12", "-batches-per-iter", "2")
	g.waitFor(t, "Iter #2:")
	out, err := exec.Command("pgrep", "-P", strconv.Itoa(g.cmd.Process.Pid)).Output()
	ranks := strings.Fields(string(out))
	if err != nil || len(ranks) != 3 {
		t.Fatalf("gorun's ranks: %q, %v", out, err)
	}
	pid, _ := strconv.Atoi(ranks[2])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := g.finish(t)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Reset 1: 2 ranks went on from step \d+: formed and synced [\d.]+[µm]?s after this rank saw the job change, first step done [\d.]+[µm]?s after that`),
		regexp.MustCompile(`Commit per step on rank 0: [\d.]+[µm]?s, [\d.]+% of a step of \d+ms`),
		regexp.MustCompile(`Iter #11: [\d.]+ img/sec per rank on 2 ranks`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("no line matching %v:\n%s\n%s", want, stdout, stderr)
		}
	}
}

// TestElasticFailureInSync: a rank is lost, and while the job formed anew
// syncs its state another one dies (in the middle of decoding rank 0's
// state): the last two form the job a third time and finish with every
// sample processed exactly once; with --reset-limit 1 that second loss
// stops the job instead.
func TestElasticFailureInSync(t *testing.T) {
	env := []string{"ELASTIC_DIE=localhost/2", "ELASTIC_DIE_STEP=20", "ELASTIC_DIE_IN_SYNC=localhost/3", "ELASTIC_DIE_IN_SYNC_AT=3"}
	argv := []string{bin(t, "gorun"), "--verbose", "-np", "4", "--min-np", "2", bin(t, "elasticrank")}
	r := run(t, command(context.Background(), env, argv...))
	mustSucceed(t, "elastic job with a rank lost during the sync", r)
	if !strings.Contains(r.stdout, "dying in the state's decoding #3") || !strings.Contains(r.stdout, elasticSums) ||
		!strings.Contains(r.stderr, "generation=3 size=2") {
		t.Fatalf("want rank 3 to die in the second sync and the job to finish on 2 ranks, every sample once:\n%s\n%s", r.stdout, r.stderr)
	}
	argv = append([]string{argv[0], "--reset-limit", "1"}, argv[1:]...)
	r = run(t, command(context.Background(), env, argv...))
	if want := "rank 3 on localhost was killed by SIGKILL; the elastic job was formed anew 1 time already (--reset-limit 1)"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
}

// killWorker kills with SIGKILL the process of this machine whose
// environment names it elastic worker id (GOROVOD_ELASTIC_ID), wherever
// gorun started it (locally or over ssh on an emulated host).
func killWorker(t *testing.T, id string) {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("\x00GOROVOD_ELASTIC_ID=" + id + "\x00")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no process of elastic worker %s", id)
}
