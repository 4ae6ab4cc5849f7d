package testnet

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// NodeIf is the name of a node's end of its veth pair, in its namespace.
const NodeIf = "eth0"

// Names are the name prefixes of one kind of fixture. An instance with
// identifier ID has the bridge Bridge+ID, the host-side veth ends
// Veth+ID+k (k = 1, 2, ...; at most 15 bytes in all), the namespaces
// NetNS+ID+"-"+Node+k, the directory os.TempDir()/Dir+ID, and the bridge
// alias Alias+owner.
type Names struct {
	Fixture string // the fixture's name, starting its errors and log lines: "testslurm"
	Bridge  string // "tsb"
	Veth    string // "tsv"
	NetNS   string // "testslurm-"
	Dir     string // "testslurm-"
	Alias   string // "gorovod-testslurm "
	Node    string // the nodes' name: "node" for node1, node2, ...
}

// Node is one emulated host: a network namespace with one address.
type Node struct {
	Name  string // Names.Node + k: node1, node2, ...
	Addr  string // its IPv4 address, on the bridge's subnet
	NetNS string // its network namespace's name for ip-netns(8): /run/netns/NetNS
	Veth  string // the root namespace's end of its veth pair, a port of the bridge
}

// Net is one instance's network: the bridge and the nodes made so far.
// Fields are set as each part is made, so that Remove removes what a
// failed construction left.
type Net struct {
	Names      Names
	ID         string // random identifier in its names
	Bridge     string // the bridge's name, once made
	BridgeAddr string // the bridge's IPv4 address, the first of Subnet
	Subnet     string // the IPv4 subnet, a /24 in 10.200.0.0-10.249.255.255
	Nodes      []Node // in order of their making
	NS         []NSID // the nodes' network namespaces
}

// New returns an instance of names with a fresh identifier; nothing is
// made yet.
func New(names Names) *Net { return &Net{Names: names, ID: NewID()} }

// Dir returns the instance's directory: os.TempDir()/Names.Dir+ID. Neither
// New nor CreateBridge makes it.
func (n *Net) Dir() string { return filepath.Join(os.TempDir(), n.Names.Dir+n.ID) }

// errorf returns an error starting with the fixture's name.
func (n *Net) errorf(format string, args ...any) error {
	return fmt.Errorf(n.Names.Fixture+": "+format, args...)
}

// ip runs ip(8) with args.
func (n *Net) ip(args ...string) error { return run(n.Names.Fixture, "ip", args...) }

// run runs name with args, returning an error with its output when it
// fails.
func run(fixture, name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %s %s: %v: %s", fixture, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// CreateBridge makes the bridge, marks it with owner (see SelfOwner) and
// gives it the first address of a /24 that no other interface or route on
// the machine uses. When another instance has the identifier, it takes a
// new one.
func (n *Net) CreateBridge(owner string) error {
	name := n.Names.Bridge + n.ID
	for attempt := 0; ; attempt++ {
		err := n.ip("link", "add", "name", name, "type", "bridge", "forward_delay", "0")
		if err == nil {
			break
		}
		if attempt == 2 || !LinkExists(name) {
			return err
		}
		n.ID = NewID() // another instance's
		name = n.Names.Bridge + n.ID
	}
	n.Bridge = name
	if err := n.ip("link", "set", "dev", name, "alias", n.Names.Alias+owner); err != nil {
		return err
	}
	for range 50 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200 + b[0]%50, b[1], 0}), 24)
		used, err := n.usedPrefixes(name)
		if err != nil {
			return err
		}
		if overlapsAny(subnet, used) {
			continue
		}
		addr := subnet.Addr().Next()
		if err := n.ip("addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", name); err != nil {
			return err
		}
		// Another instance may have taken the same subnet since: of two
		// that did, the later one at least sees the other, and tries again.
		used, err = n.usedPrefixes(name)
		if err != nil {
			return err
		}
		if overlapsAny(subnet, used) {
			if err := n.ip("addr", "del", netip.PrefixFrom(addr, 24).String(), "dev", name); err != nil {
				return err
			}
			continue
		}
		n.Subnet, n.BridgeAddr = subnet.String(), addr.String()
		return n.ip("link", "set", "dev", name, "up")
	}
	return n.errorf("no free /24 in 10.200.0.0-10.249.255.255")
}

// usedPrefixes returns the IPv4 addresses (with their prefixes) and the
// destinations of the routes of the machine, except those of the interface
// exclude.
func (n *Net) usedPrefixes(exclude string) ([]netip.Prefix, error) {
	var used []netip.Prefix
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return nil, n.errorf("ip -4 addr show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // 4: eth0    inet 192.0.2.2/24 brd ...
		if len(f) < 4 || f[2] != "inet" || f[1] == exclude {
			continue
		}
		if p, err := netip.ParsePrefix(f[3]); err == nil {
			used = append(used, p)
		}
	}
	out, err = exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return nil, n.errorf("ip -4 route show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // [type] 10.1.0.0/16 dev eth0 ...
		if len(f) == 0 || strings.Contains(" "+line+" ", " dev "+exclude+" ") {
			continue
		}
		dst := f[0]
		if len(f) > 1 && strings.IndexByte(dst, '.') < 0 && dst != "default" {
			dst = f[1] // after a route type: unreachable, blackhole, ...
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			used = append(used, p)
		} else if a, err := netip.ParseAddr(dst); err == nil {
			used = append(used, netip.PrefixFrom(a, 32))
		}
	}
	return used, nil
}

// overlapsAny reports whether p overlaps one of used.
func overlapsAny(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Overlaps(p) {
			return true
		}
	}
	return false
}

// CreateNodes makes count nodes after the bridge: each node's network
// namespace with its loopback up and one end of a veth pair, eth0, with
// the next address of the subnet and a default route through the bridge;
// the other end is a port of the bridge.
func (n *Net) CreateNodes(count int) error {
	if n.Bridge == "" {
		return n.errorf("CreateNodes before CreateBridge")
	}
	addr := netip.MustParseAddr(n.BridgeAddr)
	for range len(n.Nodes) + 1 {
		addr = addr.Next()
	}
	for range count {
		k := strconv.Itoa(len(n.Nodes) + 1)
		node := Node{Name: n.Names.Node + k, Addr: addr.String(), NetNS: n.Names.NetNS + n.ID + "-" + n.Names.Node + k,
			Veth: n.Names.Veth + n.ID + k}
		if err := n.ip("netns", "add", node.NetNS); err != nil {
			return err
		}
		n.Nodes = append(n.Nodes, node) // for Remove, now that it is ours
		id, err := NSOfFile(filepath.Join("/run/netns", node.NetNS))
		if err != nil {
			return n.errorf("%w", err)
		}
		n.NS = append(n.NS, id)
		prefix := netip.PrefixFrom(addr, 24).String()
		for _, args := range [][]string{
			{"link", "add", "name", node.Veth, "type", "veth", "peer", "name", NodeIf, "netns", node.NetNS},
			{"link", "set", "dev", node.Veth, "master", n.Bridge},
			{"link", "set", "dev", node.Veth, "up"},
			{"-n", node.NetNS, "link", "set", "dev", "lo", "up"},
			{"-n", node.NetNS, "addr", "add", prefix, "dev", NodeIf},
			{"-n", node.NetNS, "link", "set", "dev", NodeIf, "up"},
			{"-n", node.NetNS, "route", "add", "default", "via", n.BridgeAddr},
		} {
			if err := n.ip(args...); err != nil {
				return err
			}
		}
		addr = addr.Next()
	}
	return nil
}

// TBF is a token-bucket rate limit (tc-tbf(8)) for one direction of a link.
type TBF struct {
	Rate    string // tc rate: "2gbit", "100mbit"; "" means no limit
	Burst   string // bucket size; "" means DefaultBurst
	Latency string // longest a packet may wait in the queue; "" means DefaultLatency
}

// Defaults of TBF.
const (
	DefaultBurst   = "512kb"
	DefaultLatency = "20ms"
)

// Args returns the tc arguments after "root": "tbf rate R burst B latency L".
func (t TBF) Args() []string {
	burst, latency := t.Burst, t.Latency
	if burst == "" {
		burst = DefaultBurst
	}
	if latency == "" {
		latency = DefaultLatency
	}
	return []string{"tbf", "rate", t.Rate, "burst", burst, "latency", latency}
}

// Limit limits both directions of every node's link: it puts t as the root
// queueing discipline of both ends of the node's veth pair, so that what
// the node sends and what it receives each pass one token bucket at the
// node's end (and traffic between two nodes one at each). A TBF without a
// rate removes the limits.
func (n *Net) Limit(t TBF) error {
	for _, node := range n.Nodes {
		for _, end := range [][2]string{{"", node.Veth}, {node.NetNS, NodeIf}} {
			if t.Rate == "" {
				_ = run(n.Names.Fixture, "tc", tcRoot(end[0], end[1], "del")...) // fails where there is no limit
				continue
			}
			if err := run(n.Names.Fixture, "tc", append(tcRoot(end[0], end[1], "replace"), t.Args()...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// tcRoot returns tc's arguments for verb (replace, del) on the root
// queueing discipline of the device dev in the network namespace netns
// ("" for the current one).
func tcRoot(netns, dev, verb string) []string {
	args := []string{"qdisc", verb, "dev", dev, "root"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	return args
}

// NetNSNames returns the nodes' namespace names.
func (n *Net) NetNSNames() []string {
	var names []string
	for _, node := range n.Nodes {
		names = append(names, node.NetNS)
	}
	return names
}

// FreePort returns a TCP port of addr that nothing listens on now.
func FreePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("testnet: no free port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LinkExists reports whether the interface name exists.
func LinkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// Probe checks that the kernel lets this process make what New's instances
// need (network namespaces, veth pairs, bridges, and for withTBF the tbf
// queueing discipline) by trying them in a throwaway namespace.
func Probe(withTBF bool) error {
	script := "ip link add tnprobe0 type veth peer name tnprobe1 && ip link add tnprobe2 type bridge"
	if withTBF {
		script += " && tc qdisc add dev tnprobe0 root " + strings.Join(TBF{Rate: "1gbit"}.Args(), " ")
	}
	probe := exec.Command("unshare", "--net", "sh", "-c", script)
	if out, err := probe.CombinedOutput(); err != nil {
		return fmt.Errorf("namespaces, veth pairs, bridges or tbf unavailable: unshare: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
