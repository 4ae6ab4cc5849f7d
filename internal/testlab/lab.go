package testlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/internal/testenv"
	"github.com/gorovod/gorovod/internal/testnet"
)

// MaxHosts is the most hosts a lab can have: their addresses are .2 to
// .201 of its /24.
const MaxHosts = 200

// SSHPort is the port of every host's sshd, each in its own namespace.
const SSHPort = 22

// ManualOwner marks a detached lab's bridge and directory as their owner:
// no process, so stale collection never removes it.
const ManualOwner = "manual"

// names are the names of what a lab with identifier ID makes: the bridge
// "tlbID", the host ends of the veth pairs "tlvIDk", the namespaces
// "testlab-ID-hostk", the directory "$TMPDIR/testlab-ID", and the bridge
// alias "gorovod-testlab OWNER".
var names = testnet.Names{
	Fixture: "testlab",
	Bridge:  "tlb",
	Veth:    "tlv",
	NetNS:   "testlab-",
	Dir:     "testlab-",
	Alias:   "gorovod-testlab ",
	Node:    "host",
}

// Options says what lab to make.
type Options struct {
	// Hosts is the number of emulated hosts, 1 to MaxHosts.
	Hosts int
	// Rate is the tc rate of each link in each direction ("2gbit",
	// "100mbit"); "" means no limit.
	Rate string
	// Burst is the token bucket's size; "" means 512kb.
	Burst string
	// Latency bounds how long a packet may wait in the bucket's queue;
	// "" means 20ms.
	Latency string
	// Detached makes a lab that outlives the process that made it: its
	// sshds do not die with that process, and no stale collection ever
	// removes it (its owner is ManualOwner). Only Close, or Remove from any
	// process, does.
	Detached bool
}

// Host is one emulated host.
type Host struct {
	Name  string // host1, host2, ...: its host name in ssh sessions
	Addr  string // its IPv4 address on the bridge, where its sshd listens
	NetNS string // its network namespace's name for ip-netns(8): /run/netns/NetNS
	Veth  string // the root namespace's end of its veth pair (eth0 is the other), a port of the bridge
}

// Lab is a running set of emulated hosts. Its exported fields say all that
// another process needs to use it (the lab command writes them as JSON).
type Lab struct {
	Hosts      []Host // host1, host2, ... in order
	BridgeAddr string // the root namespace's address on the bridge: gorun's --bind-addr
	Subnet     string // the lab's IPv4 subnet, a /24
	Dir        string // the lab's directory: keys, sshd configurations and logs, known_hosts, ssh_config

	ID            string // random identifier in the names of its links, namespaces and directory
	Bridge        string // the bridge's interface name
	Rate          string // each link's rate limit per direction; "" when unlimited
	Burst         string // the rate limit's bucket size, when limited
	Latency       string // the rate limit's queue bound, when limited
	Detached      bool   // made with Options.Detached
	SSHPort       int    // every host's sshd port: SSHPort
	IdentityFile  string // the private key that every host accepts for root
	KnownHosts    string // a known_hosts file with every host's key, by address and by name
	SSHConfigFile string // an ssh_config with all of SSHArgs but the port
	BinDir        string // holds "ssh": the system's ssh with -F SSHConfigFile

	net       *testnet.Net
	ctx       context.Context // done once Close starts
	cancel    context.CancelFunc
	sshds     []*sshd
	closeOnce sync.Once
	closeErr  error
}

// Start makes a lab for the test t and removes it when t ends (t.Cleanup);
// its sshds' logs are printed when t has failed. It skips t when a
// prerequisite is missing (root, sshd, ssh, ip, tc for a rate, namespaces)
// unless the CI switch testenv.RequireCluster is on, in which case it
// fails t; and it fails t when the lab cannot be made.
func Start(t testing.TB, o Options) *Lab {
	t.Helper()
	if err := checkOptions(o); err != nil {
		t.Fatal(err)
	}
	if err := Prerequisites(o); err != nil {
		msg := "testlab: " + err.Error()
		if testenv.Required(testenv.RequireCluster) {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := newLab(o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testlab: lab %s logs:\n%s", l.ID, l.Logs())
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// New makes a lab, for use outside tests; the caller must Close it (or,
// for a detached lab, Close or Remove it). It first removes what labs of
// dead processes left, saying so on standard error. On failure it removes
// what it made.
func New(o Options) (*Lab, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	if err := Prerequisites(o); err != nil {
		return nil, fmt.Errorf("testlab: %w", err)
	}
	return newLab(o, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
}

// checkOptions checks o's host count.
func checkOptions(o Options) error {
	if o.Hosts < 1 || o.Hosts > MaxHosts {
		return fmt.Errorf("testlab: %d hosts: want 1 to %d", o.Hosts, MaxHosts)
	}
	return nil
}

// Prerequisites reports what is missing for a lab of o: root, sshd and the
// programs the lab runs, or what it asks of the kernel (network
// namespaces, veth pairs, bridges; tbf for a rate).
func Prerequisites(o Options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, links, sshd)")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		return fmt.Errorf("%s not found (apt-get install openssh-server): %v", sshdPath, err)
	}
	progs := []string{"ssh", "ssh-keygen", "ip", "nsenter", "unshare", "mount", "hostname", "sh"}
	if o.Rate != "" {
		progs = append(progs, "tc")
	}
	for _, name := range progs {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%s not found (apt-get install openssh-client iproute2 util-linux mount): %v", name, err)
		}
	}
	return testnet.Probe(o.Rate != "")
}

// newLab makes the lab after removing stale ones (logging with logf),
// removing what it made on failure.
func newLab(o Options, logf func(format string, args ...any)) (*Lab, error) {
	testnet.CollectStale(names, logf)
	l := &Lab{net: testnet.New(names), Detached: o.Detached, SSHPort: SSHPort}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if err := l.build(o); err != nil {
		if cerr := l.Close(); cerr != nil {
			err = fmt.Errorf("%w (and removing what was made: %v)", err, cerr)
		}
		return nil, err
	}
	return l, nil
}

// build makes the lab's parts in the order stale collection relies on:
// the bridge, marked with its owner, first.
func (l *Lab) build(o Options) error {
	owner := testnet.SelfOwner()
	if o.Detached {
		owner = ManualOwner
	}
	err := l.net.CreateBridge(owner)
	l.ID, l.Bridge, l.Subnet, l.BridgeAddr = l.net.ID, l.net.Bridge, l.net.Subnet, l.net.BridgeAddr
	if err != nil {
		return err
	}
	dir := l.net.Dir()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("testlab: %w", err)
	}
	l.Dir = dir // for Close, now that it is ours
	if err := testnet.WriteOwner(filepath.Join(dir, testnet.OwnerFile), owner); err != nil {
		return err
	}
	err = l.net.CreateNodes(o.Hosts)
	for _, n := range l.net.Nodes {
		l.Hosts = append(l.Hosts, Host{Name: n.Name, Addr: n.Addr, NetNS: n.NetNS, Veth: n.Veth})
	}
	if err != nil {
		return err
	}
	if o.Rate != "" {
		if err := l.SetRate(o.Rate, o.Burst, o.Latency); err != nil {
			return err
		}
	}
	if err := l.writeSSHFiles(); err != nil {
		return err
	}
	return l.startSSHDs()
}

// Close stops the lab and removes everything it made: the processes in its
// hosts' namespaces (sshds, their sessions and whatever those started),
// the veth pairs, the namespaces, the directory and the bridge. Later
// calls return the first one's result. A Lab that this process did not
// make (one read back from the lab command's JSON) is removed as Remove
// does.
func (l *Lab) Close() error {
	if l.net == nil {
		err := Remove(l.ID)
		if l.Dir != "" && filepath.Base(l.Dir) == names.Dir+l.ID { // made under another TMPDIR
			err = errors.Join(err, os.RemoveAll(l.Dir))
		}
		return err
	}
	l.closeOnce.Do(func() {
		l.cancel() // kills what Command started
		for _, d := range l.sshds {
			d.stop()
		}
		n := l.network()
		var errs []error
		if left := testnet.KillIn(n.NS); len(left) > 0 {
			errs = append(errs, fmt.Errorf("testlab: processes left in the hosts' namespaces: %v", left))
		}
		errs = append(errs, n.Remove(l.Dir)...)
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// Remove removes the lab with identifier id, made by any process, as Close
// does: for a detached lab whose maker has exited. It is not an error when
// there is no such lab.
func Remove(id string) error { return testnet.RemoveAll(names, id) }

// Detached returns the identifiers of the detached labs on the machine.
func Detached() []string {
	var ids []string
	for _, in := range testnet.List(names) {
		if strings.TrimSpace(in.Owner) == ManualOwner {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// Logs returns what the hosts' sshds have logged so far, each under a
// header line.
func (l *Lab) Logs() string {
	var b strings.Builder
	for _, h := range l.Hosts {
		data, err := os.ReadFile(l.sshdLog(h))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "==> %s sshd <==\n%s", h.Name, data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// SetRate changes the rate limit of every link, both directions (see
// Options); rate "" removes the limits.
func (l *Lab) SetRate(rate, burst, latency string) error {
	tbf := testnet.TBF{Rate: rate, Burst: burst, Latency: latency}
	if err := l.network().Limit(tbf); err != nil {
		return err
	}
	l.Rate, l.Burst, l.Latency = "", "", ""
	if rate != "" {
		a := tbf.Args() // tbf rate R burst B latency L
		l.Rate, l.Burst, l.Latency = a[2], a[4], a[6]
	}
	return nil
}

// Reap kills every process in the hosts' network namespaces but their
// sshds: what sessions left running, such as the ranks of a job whose
// launcher was killed. It returns the processes it could not kill.
func (l *Lab) Reap() []string {
	var keep []int
	for _, h := range l.Hosts {
		data, err := os.ReadFile(filepath.Join(l.hostDir(h), "sshd.pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
			keep = append(keep, pid)
		}
	}
	return testnet.KillIn(l.network().NS, keep...)
}

// network returns the lab's testnet.Net (the one this process made, or
// else one rebuilt from the exported fields, as for a Lab read back from
// JSON) with the namespaces that its hosts have now: a namespace once
// removed is not the lab's, whatever its identifier.
func (l *Lab) network() *testnet.Net {
	n := &testnet.Net{Names: names, ID: l.ID, Bridge: l.Bridge, BridgeAddr: l.BridgeAddr, Subnet: l.Subnet}
	if l.net != nil {
		n = &testnet.Net{Names: names, ID: l.net.ID, Bridge: l.net.Bridge, BridgeAddr: l.net.BridgeAddr, Subnet: l.net.Subnet, Nodes: l.net.Nodes}
	} else {
		for _, h := range l.Hosts {
			n.Nodes = append(n.Nodes, testnet.Node{Name: h.Name, Addr: h.Addr, NetNS: h.NetNS, Veth: h.Veth})
		}
	}
	for _, node := range n.Nodes {
		if id, err := testnet.NSOfFile(filepath.Join("/run/netns", node.NetNS)); err == nil {
			n.NS = append(n.NS, id)
		}
	}
	return n
}
