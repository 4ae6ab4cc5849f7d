package testslurm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testenv"
	"github.com/gorovod/gorovod/internal/testnet"
)

// Partition is the name of the cluster's only partition, the default one.
const Partition = "main"

// ControllerName is the host name of slurmctld (SlurmctldHost): in the
// hosts file it names the bridge's address.
const ControllerName = "controller"

// MaxNodes is the most nodes a cluster can have: node addresses are .2 to
// .201 of the cluster's /24.
const MaxNodes = 200

// SlurmdPort is the port every slurmd listens on, each in its own network
// namespace.
const SlurmdPort = 6818

// startTimeout bounds the wait for the cluster to come up: for every node
// to be idle.
const startTimeout = 60 * time.Second

// stopTimeout bounds the wait for a daemon, or for the processes left in
// the cluster's namespaces, to die.
const stopTimeout = 10 * time.Second

// Node is one node of a Cluster: a network namespace with one address.
type Node struct {
	Name  string // Slurm's node name and the namespace's host name: node1, node2, ...
	Addr  string // its IPv4 address, on the bridge's subnet
	NetNS string // its network namespace's name for ip-netns(8): /run/netns/NetNS
}

// Cluster is a running Slurm cluster, torn down when the test that started
// it ends.
type Cluster struct {
	Nodes          []Node // node1, node2, ... in order
	ID             string // random identifier in the names of its links, namespaces and directory
	Dir            string // temporary directory: configuration, munge key and socket, state, spool, logs
	Conf           string // slurm.conf, as SLURM_CONF names it to clients
	HostsFile      string // the hosts file: localhost, ControllerName, the node names
	NSSwitch       string // nsswitch.conf with "hosts: files": names resolve from HostsFile only
	Bridge         string // the bridge's interface name
	BridgeAddr     string // the bridge's IPv4 address: slurmctld's, and the clients'
	Subnet         string // the cluster's IPv4 subnet, a /24
	ControllerPort int    // slurmctld's port (SlurmctldPort) on BridgeAddr
	CPUsPerNode    int    // CPUs of each node as Slurm counts them
	MungeSocket    string // the private munged's socket (AuthInfo=socket=...)

	ctx     context.Context // done when the cluster is torn down
	cancel  context.CancelFunc
	daemons []*daemon // in start order
	logDir  string
	bins    map[string]string // daemons' absolute paths
	net     *testnet.Net      // the bridge and the nodes' namespaces
}

// Start starts a cluster of nodes nodes with cpusPerNode CPUs each (as
// Slurm counts them, whatever the machine has) and waits until every node is
// idle. It tears the cluster down when t ends. It skips t when a
// prerequisite is missing (fails it when the CI switch testenv.RequireSlurm
// is on) and fails t when the cluster does not come up within a minute,
// printing the daemons' logs.
func Start(t testing.TB, nodes int, cpusPerNode int) *Cluster {
	t.Helper()
	if nodes < 1 || nodes > MaxNodes || cpusPerNode < 1 {
		t.Fatalf("testslurm: Start with %d nodes of %d CPUs: want 1 to %d nodes of at least 1 CPU", nodes, cpusPerNode, MaxNodes)
	}
	bins, err := prerequisites()
	if err != nil {
		msg := "testslurm: " + err.Error()
		if required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	testnet.CollectStale(names, t.Logf)
	c := &Cluster{CPUsPerNode: cpusPerNode, bins: bins, net: testnet.New(names)}
	c.ID = c.net.ID
	c.ctx, c.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { c.teardown(t) })
	// The order matters to testnet.CollectStale: the bridge, marked with its
	// owner, comes first, and the directory and namespaces after it.
	if err := c.createBridge(); err != nil {
		t.Fatal(err)
	}
	if err := c.createDir(); err != nil {
		t.Fatal(err)
	}
	if err := c.createNodes(nodes); err != nil {
		t.Fatal(err)
	}
	if err := c.writeFiles(); err != nil {
		t.Fatal(err)
	}
	if err := c.startMunge(); err != nil {
		t.Fatal(err)
	}
	if err := c.startController(); err != nil {
		t.Fatal(err)
	}
	if err := c.startNodes(); err != nil {
		t.Fatal(err)
	}
	if err := c.waitIdle(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Command returns a command that runs name (srun, sbatch, salloc, squeue,
// sinfo, scontrol, ... or any program that calls them) as a client of the
// cluster. Its environment is Env(). It runs in a private mount namespace
// where HostsFile is bind-mounted over /etc/hosts and NSSwitch over
// /etc/nsswitch.conf: there, as on the nodes, node names resolve, and from
// the hosts file only (else a lookup of a node's IPv6 address, as in
// getent hosts node1, would wait for DNS, which the nodes cannot reach).
//
// The process is name itself (after a chain of execs), the leader of a
// process group of its own. When ctx is done or the cluster is torn down,
// the whole group is killed, and Wait stops waiting for output 10 s later;
// it is also killed when the thread that started it exits (a parent-death
// signal), as when the test process dies. Callers may change Env, Dir, the
// standard streams, Cancel and WaitDelay before starting it.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(c.ctx, cancel)
	argv := append([]string{"--mount", "--propagation", "slave", "sh", "-c",
		`mount --bind "$0" /etc/hosts && { [ ! -e /etc/nsswitch.conf ] || mount --bind "$1" /etc/nsswitch.conf; } && shift && exec "$@"`,
		c.HostsFile, c.NSSwitch, name}, args...)
	cmd := exec.CommandContext(ctx, "unshare", argv...)
	cmd.Env = c.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Env returns the environment of the cluster's clients: the test's own,
// without the variables through which Slurm and PMI pass a job to its
// programs or options to the client commands (SLURM_*, SBATCH_*, SALLOC_*,
// SRUN_*, SQUEUE_*, SINFO_*, SCONTROL_*, SCANCEL_*, PMI_*, PMIX_*: the test
// may itself run in a Slurm job), and with SLURM_CONF set to Conf. It is
// enough for srun, sbatch and salloc, which reach the nodes by address, but
// not for resolving node names: Command also provides the hosts file.
func (c *Cluster) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slurmVariable(kv) {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.Conf)
}

// NodeNames returns the nodes' names in order: node1, node2, ...
func (c *Cluster) NodeNames() []string {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	return names
}

// Logs returns what the daemons have logged so far, each file under a
// header line: munged's output, and the log files of slurmctld and of
// every slurmd with its steps; a daemon's standard output and error
// (NAME.out) only where its log file is empty, as when it failed early.
func (c *Cluster) Logs() string {
	if c.logDir == "" {
		return ""
	}
	entries, err := os.ReadDir(c.logDir)
	if err != nil {
		return fmt.Sprintf("testslurm: logs: %v\n", err)
	}
	var b strings.Builder
	for _, e := range entries {
		name := e.Name()
		if base, ok := strings.CutSuffix(name, ".out"); ok && nonEmpty(filepath.Join(c.logDir, base+".log")) {
			continue // what the daemon also wrote to its log file
		}
		data, err := os.ReadFile(filepath.Join(c.logDir, name))
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		fmt.Fprintf(&b, "==> %s <==\n%s", name, data)
		if data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// nonEmpty reports whether the file path has something in it.
func nonEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// required reports whether the CI switch testenv.RequireSlurm asks for
// failures instead of skips when a prerequisite (Slurm, munge, root,
// network namespaces) is missing.
func required() bool { return testenv.Required(testenv.RequireSlurm) }

// slurmVariable reports whether the environment entry kv belongs to Slurm
// or PMI (see Env).
func slurmVariable(kv string) bool {
	for _, p := range []string{"SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCONTROL_", "SCANCEL_", "PMI_", "PMIX_"} {
		if strings.HasPrefix(kv, p) {
			return true
		}
	}
	return false
}

// prerequisites checks for root, the programs Start runs and the kernel's
// namespaces, bridges and veth pairs, and returns the daemons' paths.
func prerequisites() (map[string]string, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (network namespaces, links, bind mounts)")
	}
	bins := map[string]string{}
	for _, name := range []string{"slurmctld", "slurmd", "munged"} {
		path, err := exec.LookPath(name)
		if err != nil {
			if _, serr := os.Stat("/usr/sbin/" + name); serr != nil {
				return nil, fmt.Errorf("%s not found (apt-get install slurm-wlm munge): %v", name, err)
			}
			path = "/usr/sbin/" + name
		}
		bins[name] = path
	}
	for _, name := range []string{"srun", "sbatch", "salloc", "sinfo", "scontrol", "munge", "ip", "unshare", "nsenter", "mount", "hostname", "sh"} {
		if _, err := exec.LookPath(name); err != nil {
			return nil, fmt.Errorf("%s not found (apt-get install slurm-wlm munge iproute2 util-linux mount): %v", name, err)
		}
	}
	// Everything Start asks of the kernel, tried in a throwaway namespace.
	probe := exec.Command("unshare", "--net", "--mount", "--uts", "--pid", "--fork", "--mount-proc", "--propagation", "slave",
		"sh", "-c", "ip link add tsprobe0 type veth peer name tsprobe1 && ip link add tsprobe2 type bridge && hostname probe")
	if out, err := probe.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("namespaces, veth pairs or bridges unavailable: unshare: %v: %s", err, bytes.TrimSpace(out))
	}
	return bins, nil
}

// createDir makes the cluster's directory and its subdirectories.
func (c *Cluster) createDir() error {
	// Not t.TempDir: a test's name can make a path too long for the
	// munge socket (108 bytes), and testnet.CollectStale finds it by name.
	dir := c.net.Dir()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("testslurm: %w", err)
	}
	c.Dir = dir // for teardown, now that it is ours
	if err := testnet.WriteOwner(filepath.Join(c.Dir, testnet.OwnerFile), testnet.SelfOwner()); err != nil {
		return err
	}
	c.logDir = filepath.Join(c.Dir, "log")
	c.Conf = filepath.Join(c.Dir, "slurm.conf")
	c.HostsFile = filepath.Join(c.Dir, "hosts")
	c.NSSwitch = filepath.Join(c.Dir, "nsswitch.conf")
	c.MungeSocket = filepath.Join(c.Dir, "munge", "munge.socket")
	for _, sub := range []string{"log", "munge", "state", "spool", "run"} {
		if err := os.Mkdir(filepath.Join(c.Dir, sub), 0o755); err != nil {
			return fmt.Errorf("testslurm: %w", err)
		}
	}
	return nil
}

// startMunge starts the cluster's own munged with a fresh key and waits for
// its socket.
func (c *Cluster) startMunge() error {
	dir := filepath.Dir(c.MungeSocket)
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		return fmt.Errorf("testslurm: munge key: %w", err)
	}
	d, err := c.startDaemon("munged", false, "", "", c.bins["munged"], "--foreground", "--force",
		"--socket="+c.MungeSocket, "--key-file="+keyFile,
		"--pid-file="+filepath.Join(dir, "munged.pid"), "--seed-file="+filepath.Join(dir, "munged.seed"),
		"--log-file="+filepath.Join(c.logDir, "munged.log"))
	if err != nil {
		return err
	}
	return waitFor("munged's socket", 15*time.Second, []*daemon{d}, func() (bool, string) {
		out, err := exec.Command("munge", "-n", "-S", c.MungeSocket).CombinedOutput()
		return err == nil, string(out)
	})
}

// startController starts slurmctld on a free port of the bridge's address
// and waits until it answers; it tries other ports when one is taken.
func (c *Cluster) startController() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if c.ControllerPort, err = testnet.FreePort(c.BridgeAddr); err != nil {
			return err
		}
		if err = os.WriteFile(c.Conf, []byte(c.slurmConf()), 0o644); err != nil {
			return fmt.Errorf("testslurm: %w", err)
		}
		var d *daemon
		d, err = c.startDaemon("slurmctld", true, ControllerName, "", c.bins["slurmctld"], "-D", "-i", "-f", c.Conf)
		if err != nil {
			return err
		}
		err = waitFor("slurmctld", 30*time.Second, []*daemon{d}, func() (bool, string) {
			out, _ := c.output(10*time.Second, "scontrol", "ping")
			return strings.Contains(out, "is UP"), out
		})
		if err == nil {
			return nil
		}
		if !d.exited() { // up but not answering: trying again would not help
			return err
		}
		d.stop()
		c.daemons = c.daemons[:len(c.daemons)-1] // d, gone: not to be waited on
	}
	return err
}

// startNodes starts a slurmd in every node's namespaces.
func (c *Cluster) startNodes() error {
	for _, n := range c.Nodes {
		if err := os.MkdirAll(filepath.Join(c.Dir, "spool", n.Name), 0o755); err != nil {
			return fmt.Errorf("testslurm: %w", err)
		}
		if _, err := c.startDaemon("slurmd-"+n.Name, true, n.Name, n.NetNS,
			c.bins["slurmd"], "-D", "-N", n.Name, "-f", c.Conf); err != nil {
			return err
		}
	}
	return nil
}

// waitIdle waits until sinfo reports every node idle.
func (c *Cluster) waitIdle() error {
	return waitFor("every node to be idle", startTimeout, c.daemons, func() (bool, string) {
		out, err := c.output(10*time.Second, "sinfo", "-h", "-N", "-o", "%N %T")
		if err != nil {
			return false, out
		}
		idle := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
				idle[f[0]] = true
			}
		}
		for _, n := range c.Nodes {
			if !idle[n.Name] {
				return false, out
			}
		}
		return true, out
	})
}

// output runs a client command with a timeout and returns its combined
// output.
func (c *Cluster) output(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := c.Command(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// waitFor polls ready every 100 ms until it reports true, one of daemons
// exits, or timeout passes; the error carries ready's last words.
func waitFor(what string, timeout time.Duration, daemons []*daemon, ready func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := ready()
		if ok {
			return nil
		}
		last = msg
		for _, d := range daemons {
			if d.exited() {
				return fmt.Errorf("testslurm: %s exited (%v) while waiting for %s; last answer: %s", d.name, d.err, what, strings.TrimSpace(last))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testslurm: no %s within %v; last answer: %s", what, timeout, strings.TrimSpace(last))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// teardown stops everything and removes everything Start made, reporting
// what it could not remove as test errors.
func (c *Cluster) teardown(t testing.TB) {
	c.cancel() // kills the clients still running
	for i := len(c.daemons) - 1; i >= 0; i-- {
		c.daemons[i].stop()
	}
	ns := append([]testnet.NSID(nil), c.net.NS...)
	for _, d := range c.daemons {
		if d.pidNS.Valid() {
			ns = append(ns, d.pidNS)
		}
	}
	if left := testnet.KillIn(ns); len(left) > 0 {
		t.Errorf("testslurm: processes left in the cluster's namespaces: %v", left)
	}
	if t.Failed() {
		t.Logf("testslurm: cluster %s logs:\n%s", c.ID, c.Logs())
	}
	for _, err := range c.net.Remove(c.Dir) {
		t.Error(err)
	}
}
