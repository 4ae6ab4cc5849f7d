package launchtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testslurm"
	"github.com/gorovod/gorovod/internal/testutil"
)

// mnistArgs trains the mnist example briefly on its synthetic data set (so
// the result does not depend on whether Fashion-MNIST is installed).
func mnistArgs(t *testing.T) []string {
	return []string{"-data", t.TempDir(), "-synthetic-train", "6000", "-synthetic-test", "500", "-hidden", "64",
		"-epochs", "1", "-batch", "16", "-threads", "1", "-seed", "5"}
}

// finalLines returns mnist's epoch summary and final lines (without the
// timing figures, which vary), to compare two runs.
func finalLines(t *testing.T, out string) string {
	t.Helper()
	epoch := regexp.MustCompile(`epoch \d+: loss [0-9.]+  test accuracy [0-9.]+%`).FindAllString(out, -1)
	final := regexp.MustCompile(`final test accuracy [0-9.]+% after \d+ epochs on \d+ rank\(s\)`).FindString(out)
	if len(epoch) == 0 || final == "" {
		t.Fatalf("no epoch summary or final line in:\n%s", out)
	}
	return strings.Join(epoch, "\n") + "\n" + final
}

// gorunMnist trains on np local ranks under gorun and returns its summary.
func gorunMnist(t *testing.T, np int) string {
	t.Helper()
	r := run(t, command(context.Background(), nil, append([]string{bin(t, "gorun"), "-np", strconv.Itoa(np), bin(t, "mnist")}, mnistArgs(t)...)...))
	mustSucceed(t, "gorun mnist", r)
	return finalLines(t, r.stdout)
}

// TestSlurm runs jobs on a real Slurm cluster of two nodes (network
// namespaces with their own addresses, munged, slurmctld and one slurmd
// each): srun of each rank, sbatch of the example script in both its
// forms, gorun inside salloc starting its ranks through srun, and a start
// by hand with GOROVOD_CLUSTER on the same two emulated hosts.
func TestSlurm(t *testing.T) {
	c := testslurm.Start(t, 2, 2)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.Logs())
		}
	})
	ctx := context.Background()
	slurm := func(name string, args ...string) result {
		t.Helper()
		return run(t, c.Command(ctx, name, args...))
	}

	t.Run("srun hello", func(t *testing.T) {
		r := slurm("srun", "-N", "2", "-n", "4", bin(t, "hello"))
		mustSucceed(t, "srun hello", r)
		if strings.Count(r.stdout, "size=4 sum=10") != 1 || strings.Contains(r.stdout, "size=1") {
			t.Errorf("stdout %q: want one job of 4 ranks", r.stdout)
		}
		if !strings.Contains(r.stderr, "launcher=slurm") || !strings.Contains(r.stderr, "rendezvous=node1:") {
			t.Errorf("rank 0 should say it joined a Slurm job served on node1:\n%s", r.stderr)
		}
	})

	t.Run("srun odd count", func(t *testing.T) {
		r := slurm("srun", "-N", "2", "-n", "3", bin(t, "hello"))
		mustSucceed(t, "srun -n 3 hello", r)
		if !strings.Contains(r.stdout, "size=3 sum=6") {
			t.Errorf("stdout %q", r.stdout)
		}
	})

	t.Run("srun allreduce_bench", func(t *testing.T) {
		r := slurm("srun", append([]string{"-N", "2", "-n", "4", bin(t, "allreduce_bench")}, benchArgs...)...)
		mustSucceed(t, "srun allreduce_bench", r)
		if !strings.Contains(r.stdout, "4 ranks") {
			t.Errorf("not 4 ranks:\n%s", r.stdout)
		}
		benchWrong(t, r.stdout)
	})

	t.Run("srun ps job", func(t *testing.T) {
		// 4 tasks on 2 nodes of 2 CPUs: rank 0 the chief and rank 1 the
		// worker on node1, the two servers on node2.
		r := slurm("srun", "-N", "2", "-n", "4", "--export=ALL,GOROVOD_PS_SERVERS=2", bin(t, "psjoin"))
		mustSucceed(t, "srun -n 4 psjoin with GOROVOD_PS_SERVERS=2", r)
		places := psPlaces(t, r.stdout)
		want := map[string]string{"chief 0": "0 node1", "worker 0": "1 node1", "ps 0": "2 node2", "ps 1": "3 node2"}
		for task, place := range want {
			if places[task] != place {
				t.Errorf("%s is rank and host %q, want %q\n%s", task, places[task], place, r.stdout)
			}
		}
	})

	var wantMnist string
	var once sync.Once
	mnistUnderGorun := func(t *testing.T) string {
		once.Do(func() { wantMnist = gorunMnist(t, 4) })
		return wantMnist
	}

	t.Run("srun: a rank killed mid-training fails the job", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, runTimeout)
		defer cancel()
		args := append([]string{"-N", "2", "-n", "4", bin(t, "mnist")}, mnistArgs(t)...)
		args = append(args, "-epochs", "50") // far longer than the test waits
		cmd := c.Command(ctx, "srun", args...)
		var out testutil.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ranks := "^" + bin(t, "mnist") + " "
		waitFor(t, "4 ranks training", func() bool { return len(pids(ranks)) == 4 && strings.Contains(out.String(), "epoch 1 [") })
		victim := pids(ranks)[2]
		start := time.Now()
		syscall.Kill(victim, syscall.SIGKILL)
		err := cmd.Wait()
		if err == nil {
			t.Fatalf("srun succeeded after a rank was killed:\n%s", out.String())
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the job took %v to end after a rank was killed", d)
		}
		if left := pids(ranks); len(left) > 0 {
			t.Errorf("ranks still running: %v", left)
		}
		t.Logf("ended %v after the kill: %v", time.Since(start).Round(time.Millisecond), err)
	})

	t.Run("srun mnist matches gorun", func(t *testing.T) {
		r := slurm("srun", append([]string{"-N", "2", "-n", "4", bin(t, "mnist")}, mnistArgs(t)...)...)
		mustSucceed(t, "srun mnist", r)
		got, want := finalLines(t, r.stdout), mnistUnderGorun(t)
		if got != want {
			t.Errorf("under srun:\n%s\nunder gorun:\n%s", got, want)
		}
		t.Logf("srun -N 2 -n 4 mnist: %s", got)
	})

	t.Run("gorun in salloc", func(t *testing.T) {
		r := slurm("salloc", append([]string{"-N", "2", "-n", "4", bin(t, "gorun"), bin(t, "mnist")}, mnistArgs(t)...)...)
		mustSucceed(t, "salloc gorun mnist", r)
		got := finalLines(t, r.stdout)
		if want := mnistUnderGorun(t); got != want {
			t.Errorf("gorun in salloc:\n%s\ngorun on this host:\n%s", got, want)
		}
		if !strings.Contains(r.stdout, "[0]<stdout>: final test accuracy") {
			t.Errorf("rank 0's summary did not come through gorun's prefixed output:\n%s", r.stdout)
		}
	})

	t.Run("gorun in salloc places and stops ranks", func(t *testing.T) {
		// Rank 2 fails; the others sleep, one of them ignoring SIGTERM, so
		// that gorun must stop them through srun, the last one by force.
		marker := "299." + strconv.Itoa(os.Getpid()%1000)
		script := `echo "rank $GOROVOD_RANK on $SLURMD_NODENAME"
case $GOROVOD_RANK in 2) sleep 1; exit 3;; 3) trap "" TERM;; esac
sleep ` + marker + ` & wait; wait`
		r := slurm("salloc", "-N", "2", "-n", "4", bin(t, "gorun"), "--start-timeout", "20s", "sh", "-c", script)
		if r.code == 0 || !strings.Contains(r.stderr, "rank 2 on node2 exited with status 3") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		for rank, node := range []string{"node1", "node1", "node2", "node2"} {
			if want := "rank " + strconv.Itoa(rank) + " on " + node; !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		if left := pids(sleeping(marker)); len(left) > 0 {
			t.Errorf("ranks left running after gorun ended: %v", left)
		}
	})

	t.Run("SIGKILLed gorun in salloc leaves no rank", func(t *testing.T) {
		marker := "298." + strconv.Itoa(os.Getpid()%1000)
		ctx, cancel := context.WithCancel(ctx)
		cmd := c.Command(ctx, "salloc", "-N", "2", "-n", "4", bin(t, "gorun"), "sleep", marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); cmd.Wait() }() // kills salloc's whole process group
		waitFor(t, "4 ranks running", func() bool { return len(pids(sleeping(marker))) == 4 })
		gorun := pids("^" + bin(t, "gorun") + " sleep " + marker + "$")
		if len(gorun) != 1 {
			t.Fatalf("gorun processes: %v", gorun)
		}
		syscall.Kill(gorun[0], syscall.SIGKILL)
		waitFor(t, "every rank gone", func() bool { return len(pids(sleeping(marker))) == 0 })
	})

	t.Run("sbatch", func(t *testing.T) {
		script, err := filepath.Abs("../examples/slurm/train.sbatch")
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"srun", "gorun"} {
			out := filepath.Join(t.TempDir(), "job.out")
			cmd := c.Command(ctx, "sbatch", "--wait", "--output="+out, script)
			cmd.Env = append(cmd.Env, "MODE="+mode, "PROG="+bin(t, "hello"), "ARGS=", "GORUN="+bin(t, "gorun"))
			r := run(t, cmd)
			log, _ := os.ReadFile(out)
			if r.code != 0 {
				t.Fatalf("sbatch (MODE=%s): exit %d\n%s%s\njob output:\n%s\n%s", mode, r.code, r.stdout, r.stderr, log, c.Logs())
			}
			if !strings.Contains(string(log), "size=4 sum=10") {
				t.Errorf("MODE=%s: the job's output lacks size=4 sum=10:\n%s", mode, log)
			}
		}
	})

	t.Run("srun forgotten in a batch script", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "job.out")
		r := slurm("sbatch", "--wait", "-N", "2", "-n", "4", "--output="+out, "--wrap", bin(t, "hello"))
		log, _ := os.ReadFile(out)
		if r.code == 0 || strings.Contains(string(log), "size=") || !strings.Contains(string(log), "start each rank with srun") {
			t.Errorf("sbatch exit %d; job output:\n%s", r.code, log)
		}
	})

	t.Run("mpirun across hosts", func(t *testing.T) {
		need(t, "mpirun.openmpi")
		// mpirun starts its daemon on each emulated host through an "rsh
		// agent" that enters the host's network namespace instead of ssh.
		agent := filepath.Join(t.TempDir(), "nsrsh")
		// Each host's daemon gets a temporary directory of its own: Open
		// MPI's session directories are named by the host name, which the
		// emulated hosts share with each other and with mpirun, as they
		// share /tmp, and two daemons creating the same one at once fail
		// ("mkdir ... File exists").
		var cases strings.Builder
		for _, n := range c.Nodes {
			cases.WriteString(n.Addr + ") ns=" + n.NetNS + " tmp=" + t.TempDir() + ";; ")
		}
		script := "#!/bin/sh\nhost=$1; shift\ncase $host in " + cases.String() + "*) echo \"nsrsh: unknown host $host\" >&2; exit 1;; esac\n" +
			"exec nsenter --net=/run/netns/$ns env TMPDIR=$tmp sh -c \"$*\"\n"
		if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		a, b := c.Nodes[0].Addr, c.Nodes[1].Addr
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte(strings.Repeat("c3", 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("mpirun.openmpi", "--oversubscribe", "--bind-to", "none", "-np", "4", "-H", a+":2,"+b+":2",
			"--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", c.Subnet,
			"--mca", "rtc", "^hwloc", // Open MPI 4.1's orted sometimes crashes sharing its hwloc topology in shared memory
			"-x", "GOROVOD_RENDEZVOUS_ADDR="+a+":29412", "-x", "GOROVOD_SECRET_FILE="+secret, bin(t, "hello"))
		cmd.Env = append(os.Environ(), append(ompiEnv, "TMPDIR="+t.TempDir())...) // mpirun's own, too
		r := run(t, cmd)
		mustSucceed(t, "mpirun across hosts", r)
		if strings.Count(r.stdout, "size=4 sum=10") != 1 || strings.Contains(r.stderr, "derived from") {
			t.Errorf("stdout %q, stderr:\n%s", r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "launcher=openmpi") || !strings.Contains(r.stderr, "rendezvous="+a+":29412") {
			t.Errorf("rank 0 did not serve on %s:29412 as -x said:\n%s", a, r.stderr)
		}
	})

	t.Run("by hand with GOROVOD_CLUSTER", func(t *testing.T) {
		spec, _ := json.Marshal(map[string]any{"hosts": []string{c.Nodes[0].Addr, c.Nodes[1].Addr}, "port": 29411})
		var cmds []*exec.Cmd
		for i, node := range c.Nodes[:2] {
			cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + node.NetNS, bin(t, "mnist")}, mnistArgs(t)...)...)
			cmd.Env = append(os.Environ(), "GOROVOD_CLUSTER="+string(spec), "GOROVOD_CLUSTER_INDEX="+strconv.Itoa(i))
			cmds = append(cmds, cmd)
		}
		results := runAll(t, cmds...)
		for i, r := range results {
			mustSucceed(t, "mnist on "+c.Nodes[i].Name, r)
		}
		got, want := finalLines(t, results[0].stdout), gorunMnist(t, 2)
		if got != want {
			t.Errorf("by hand:\n%s\ngorun -np 2:\n%s", got, want)
		}
		if !strings.Contains(results[0].stderr, "launcher=cluster") {
			t.Errorf("rank 0 did not log the cluster launcher:\n%s", results[0].stderr)
		}
	})
}

// sleeping is the pattern of a rank's "sleep marker" process, run by a
// shell or by slurmstepd (which gives its full path).
func sleeping(marker string) string { return "^(/usr/bin/)?sleep " + marker + "$" }

// pids returns the processes whose command line matches the regular
// expression re.
func pids(re string) []int {
	out, _ := exec.Command("pgrep", "-f", "--", re).Output()
	var ps []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			ps = append(ps, p)
		}
	}
	return ps
}

// waitFor polls cond for up to a minute and fails t if it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			ps, _ := exec.Command("ps", "-eo", "pid,args").Output()
			t.Fatalf("no %s within a minute; processes:\n%s", what, ps)
		}
	}
}
