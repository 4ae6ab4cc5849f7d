package testslurm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testslurm"
)

// run runs a client command of c and returns its standard output, failing
// t with both outputs when it fails.
func run(t *testing.T, ctx context.Context, c *testslurm.Cluster, name string, args ...string) string {
	t.Helper()
	cmd := c.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkTasks checks lines "PROCID NODENAME HOSTNAME ADDRESS..." of tasks
// 0..n-1 against the cluster's nodes: each task ran where it says, and
// perNode[k] tasks ran on node k+1.
func checkTasks(t *testing.T, c *testslurm.Cluster, out string, perNode []int) {
	t.Helper()
	addr := map[string]string{}
	for _, n := range c.Nodes {
		addr[n.Name] = n.Addr
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	seen := map[int]bool{}
	count := map[string]int{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("task line %q: want PROCID NODENAME HOSTNAME ADDRESS; all:\n%s", line, out)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || seen[id] {
			t.Fatalf("task line %q: bad or repeated rank; all:\n%s", line, out)
		}
		seen[id] = true
		if f[2] != f[1] {
			t.Errorf("task %d on %s: host name %s", id, f[1], f[2])
		}
		if want, ok := addr[f[1]]; !ok || f[3] != want {
			t.Errorf("task %d on %s: address %s, want %s", id, f[1], f[3], want)
		}
		count[f[1]]++
	}
	total := 0
	for k, want := range perNode {
		total += want
		if name := c.Nodes[k].Name; count[name] != want {
			t.Errorf("%d tasks on %s, want %d; all:\n%s", count[name], name, want, out)
		}
	}
	for id := range total {
		if !seen[id] {
			t.Errorf("no task %d of %d; all:\n%s", id, total, out)
		}
	}
	if len(seen) != total {
		t.Errorf("%d tasks, want %d; all:\n%s", len(seen), total, out)
	}
}

// taskLine is a shell command printing a task's rank, Slurm node, host
// name and addresses.
const taskLine = `echo $SLURM_PROCID $SLURMD_NODENAME $(hostname) $(hostname -I)`

func TestClusterRuns(t *testing.T) {
	t.Parallel() // beside TestTeardownLeavesNothing's cluster
	c := testslurm.Start(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if len(c.Nodes) != 2 || c.Nodes[0].Name != "node1" || c.Nodes[1].Name != "node2" {
		t.Fatalf("nodes %+v", c.Nodes)
	}
	if _, subnet, err := net.ParseCIDR(c.Subnet); err != nil || !subnet.Contains(net.ParseIP(c.BridgeAddr)) {
		t.Fatalf("bridge address %s not in subnet %s (%v)", c.BridgeAddr, c.Subnet, err)
	}

	t.Run("srun", func(t *testing.T) {
		out := run(t, ctx, c, "srun", "-N", "2", "-n", "4", "sh", "-c", taskLine)
		checkTasks(t, c, out, []int{2, 2})
	})

	t.Run("sbatch", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "job.sh")
		output := filepath.Join(dir, "job.out")
		// The nodes resolve each other's names, reach each other, and
		// the batch script runs on the first node.
		body := "#!/bin/sh\nset -e\n" +
			"echo batch $SLURMD_NODENAME $(hostname)\n" +
			"getent hosts node1 node2 " + testslurm.ControllerName + " >/dev/null\n" +
			"srun -n 2 sh -c '" + taskLine + "'\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, c, "sbatch", "--wait", "-N", "2", "-n", "2", "-o", output, script)
		data, err := os.ReadFile(output)
		if err != nil {
			t.Fatal(err)
		}
		first, rest, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if first != "batch node1 node1" {
			t.Errorf("batch script says %q, want %q; all:\n%s", first, "batch node1 node1", data)
		}
		checkTasks(t, c, rest, []int{1, 1})
	})

	t.Run("salloc", func(t *testing.T) {
		out := run(t, ctx, c, "salloc", "-N", "2", "srun", "-n", "2", "sh", "-c", taskLine)
		checkTasks(t, c, out, []int{1, 1})
	})

	t.Run("node-to-node", func(t *testing.T) {
		// Task 1 on node2 dials task 0 on node1 by name: the tasks see
		// the hosts file, and the bridge forwards between nodes.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := c.Command(ctx, "srun", "-N", "2", "-n", "2", exe)
		cmd.Env = append(cmd.Env, helperEnv+"=1")
		// srun's own notices ("job 4 queued and waiting for resources",
		// when an earlier job's nodes are still being released) go to
		// stderr; the tasks' answer to stdout.
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		if err != nil || strings.TrimSpace(stdout.String()) != "node1 answered node2" {
			t.Errorf("srun of the helper: %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
	})
}

func TestTeardownLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var c *testslurm.Cluster
	clientDone := make(chan error, 1)
	t.Run("cluster", func(t *testing.T) {
		c = testslurm.Start(t, 2, 1)
		// Left running at the end: a batch job with a step, and an srun
		// client that nobody stops.
		run(t, ctx, c, "sbatch", "-N", "2", "-o", "/dev/null", "--wrap", "srun sleep 300")
		client := c.Command(context.Background(), "srun", "-N", "2", "sleep", "300")
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { clientDone <- client.Wait() }()
		deadline := time.Now().Add(time.Minute)
		for len(processesOf(c.Dir, "sleep")) < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("4 sleep tasks not running after a minute: %v", processesOf(c.Dir, "sleep"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if c == nil {
		t.Skip("no cluster")
	}
	select {
	case err := <-clientDone:
		if err == nil {
			t.Error("the srun client left running succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the srun client left running is still running a minute after teardown")
	}
	if left := processesOf(c.Dir, ""); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	for _, n := range c.Nodes {
		if _, err := os.Lstat(filepath.Join("/run/netns", n.NetNS)); err == nil {
			t.Errorf("network namespace %s left", n.NetNS)
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if strings.Contains(ifc.Name, c.ID) {
			t.Errorf("interface %s left", ifc.Name)
		}
	}
	if _, err := os.Lstat(c.Dir); err == nil {
		t.Errorf("directory %s left", c.Dir)
	}
}

// crashEnv, set, makes TestDeadProcessLeftoversRemoved start a cluster and
// die without its cleanups.
const crashEnv = "TESTSLURM_CRASH"

func TestDeadProcessLeftoversRemoved(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		c := testslurm.Start(t, 2, 1)
		ctx := context.Background()
		run(t, ctx, c, "sbatch", "-N", "2", "-o", "/dev/null", "--wrap", "srun sleep 300")
		if err := c.Command(ctx, "srun", "-N", "2", "sleep", "300").Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("cluster %s %s %s\n", c.ID, c.Dir, c.Nodes[0].NetNS)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^TestDeadProcessLeftoversRemoved$", "-test.count=1")
	child.Env = append(os.Environ(), crashEnv+"=1")
	out, err := child.Output()
	var id, dir, netns string
	var serr error = errors.New("no line")
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "cluster ") {
			_, serr = fmt.Sscanf(line, "cluster %s %s %s", &id, &dir, &netns)
		}
	}
	if serr != nil {
		if strings.Contains(string(out), "SKIP") {
			t.Skipf("the child skipped:\n%s", out)
		}
		t.Fatalf("the child (%v) printed no cluster:\n%s", err, out)
	}
	// The daemons and the jobs die with the process.
	deadline := time.Now().Add(30 * time.Second)
	for len(processesOf(dir, "")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the dead test process's cluster left: %v", processesOf(dir, ""))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next Start removes the rest.
	testslurm.Start(t, 1, 1)
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("directory %s left", dir)
	}
	if _, err := os.Lstat(filepath.Join("/run/netns", netns)); err == nil {
		t.Errorf("network namespace %s left", netns)
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if strings.Contains(ifc.Name, id) {
			t.Errorf("interface %s left", ifc.Name)
		}
	}
}

// processesOf returns the live processes named comm (any when empty) whose
// command line or environment mentions dir, as "pid (comm)".
func processesOf(dir, comm string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		name, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if comm != "" && strings.TrimSpace(string(name)) != comm {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(cmdline, []byte(dir)) || bytes.Contains(environ, []byte(dir)) {
			found = append(found, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(name))))
		}
	}
	return found
}

// helperEnv, set, makes the test binary a task of the node-to-node test.
const helperEnv = "TESTSLURM_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := helper(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper is a task of the node-to-node test: task 0 answers one
// connection on port 7777 with its node name; task 1 dials node1:7777,
// retrying until task 0 listens, and prints the answer.
func helper() error {
	me := os.Getenv("SLURMD_NODENAME")
	if os.Getenv("SLURM_PROCID") == "0" {
		l, err := net.Listen("tcp", ":7777")
		if err != nil {
			return err
		}
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "%s answered ", me)
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "node1:7777", time.Second)
		if err == nil {
			defer conn.Close()
			var b bytes.Buffer
			if _, err := b.ReadFrom(conn); err != nil {
				return err
			}
			fmt.Println(b.String() + me)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
