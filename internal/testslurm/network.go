package testslurm

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
	"testing"
)

// Names of what a cluster with identifier ID (6 hexadecimal digits) makes:
// the bridge "tsbID", the host ends of the veth pairs "tsvIDk" (at most 12
// bytes of the 15 an interface name may have), the network namespaces
// "testslurm-ID-nodek" and the directory "$TMPDIR/testslurm-ID".
const (
	bridgePrefix = "tsb"
	vethPrefix   = "tsv"
	netnsPrefix  = "testslurm-"
	dirPrefix    = "testslurm-"
	// aliasPrefix starts the bridge's interface alias, which names the
	// process that owns it (see selfOwner).
	aliasPrefix = "gorovod-testslurm "
)

// ip runs ip(8) with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testslurm: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// createBridge makes the bridge, marks it with its owner and gives it the
// first address of a /24 that no other interface on the machine uses.
func (c *Cluster) createBridge() error {
	name := bridgePrefix + c.ID
	for attempt := 0; ; attempt++ {
		err := ip("link", "add", "name", name, "type", "bridge", "forward_delay", "0")
		if err == nil {
			break
		}
		if attempt == 2 || !linkExists(name) {
			return err
		}
		c.ID = newID() // another cluster's
		name = bridgePrefix + c.ID
	}
	c.Bridge = name
	if err := ip("link", "set", "dev", name, "alias", aliasPrefix+selfOwner()); err != nil {
		return err
	}
	for range 50 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200 + b[0]%50, b[1], 0}), 24)
		used, err := usedPrefixes(name)
		if err != nil {
			return err
		}
		if overlapsAny(subnet, used) {
			continue
		}
		addr := subnet.Addr().Next()
		if err := ip("addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", name); err != nil {
			return err
		}
		// Another fixture may have taken the same subnet since: of two
		// that did, the later one at least sees the other, and tries again.
		used, err = usedPrefixes(name)
		if err != nil {
			return err
		}
		if overlapsAny(subnet, used) {
			if err := ip("addr", "del", netip.PrefixFrom(addr, 24).String(), "dev", name); err != nil {
				return err
			}
			continue
		}
		c.Subnet, c.BridgeAddr = subnet.String(), addr.String()
		return ip("link", "set", "dev", name, "up")
	}
	return fmt.Errorf("testslurm: no free /24 in 10.200.0.0-10.249.255.255")
}

// usedPrefixes returns the IPv4 addresses (with their prefixes) and the
// destinations of the routes of the machine, except those of the interface
// exclude.
func usedPrefixes(exclude string) ([]netip.Prefix, error) {
	var used []netip.Prefix
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("testslurm: ip -4 addr show: %w", err)
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
		return nil, fmt.Errorf("testslurm: ip -4 route show: %w", err)
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

// createNodes makes each node's network namespace with its loopback up and
// one end of a veth pair, eth0, with its address and a default route
// through the bridge; the other end is a port of the bridge.
func (c *Cluster) createNodes(nodes int) error {
	base := netip.MustParseAddr(c.BridgeAddr)
	addr := base
	for k := 1; k <= nodes; k++ {
		addr = addr.Next()
		n := Node{Name: "node" + strconv.Itoa(k), Addr: addr.String(), NetNS: netnsPrefix + c.ID + "-node" + strconv.Itoa(k)}
		if err := ip("netns", "add", n.NetNS); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n) // for teardown, now that it is ours
		id, err := nsOfFile(filepath.Join("/run/netns", n.NetNS))
		if err != nil {
			return fmt.Errorf("testslurm: %w", err)
		}
		c.ns = append(c.ns, id)
		veth := vethPrefix + c.ID + strconv.Itoa(k)
		prefix := netip.PrefixFrom(addr, 24).String()
		for _, args := range [][]string{
			{"link", "add", "name", veth, "type", "veth", "peer", "name", "eth0", "netns", n.NetNS},
			{"link", "set", "dev", veth, "master", c.Bridge},
			{"link", "set", "dev", veth, "up"},
			{"-n", n.NetNS, "link", "set", "dev", "lo", "up"},
			{"-n", n.NetNS, "addr", "add", prefix, "dev", "eth0"},
			{"-n", n.NetNS, "link", "set", "dev", "eth0", "up"},
			{"-n", n.NetNS, "route", "add", "default", "via", c.BridgeAddr},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// freePort returns a TCP port of addr that nothing listens on now.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("testslurm: no free port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// removeNetwork removes what a cluster with identifier id made, in the
// reverse order of its making: the veth pairs, the network namespaces
// netns, the directory dir (when not empty) and the bridge (when not
// empty). Its processes must be gone. It returns what failed.
func removeNetwork(id, bridge string, netns []string, dir string) []error {
	var errs []error
	if ifaces, err := net.Interfaces(); err == nil {
		for _, ifc := range ifaces {
			if strings.HasPrefix(ifc.Name, vethPrefix+id) {
				if err := ip("link", "del", "dev", ifc.Name); err != nil && linkExists(ifc.Name) {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, ns := range netns {
		if _, err := os.Lstat(filepath.Join("/run/netns", ns)); err != nil {
			continue
		}
		if err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("testslurm: %w", err))
		}
	}
	if bridge != "" && linkExists(bridge) {
		if err := ip("link", "del", "dev", bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// linkExists reports whether the interface name exists.
func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// isID reports whether s could be a cluster identifier.
func isID(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// collectStale removes what clusters of test processes that died without
// their cleanups left: the network namespaces, links and directories of
// every cluster whose bridge names a dead owner, or that has no bridge.
// Namespaces and directories are listed before the bridges: a live cluster
// makes its bridge first and removes it last, so that all that is listed
// without a bridge is stale.
func collectStale(t testing.TB) {
	t.Helper()
	netnsOf := map[string][]string{}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), netnsPrefix)
			if id, _, ok2 := strings.Cut(rest, "-"); ok && ok2 && isID(id) {
				netnsOf[id] = append(netnsOf[id], e.Name())
			}
		}
	}
	dirOf := map[string]string{}
	if matches, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*")); err == nil {
		for _, m := range matches {
			if id := strings.TrimPrefix(filepath.Base(m), dirPrefix); isID(id) {
				dirOf[id] = m
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return
	}
	stale := map[string]bool{}
	bridges := map[string]bool{}
	for _, ifc := range ifaces {
		if id, ok := strings.CutPrefix(ifc.Name, bridgePrefix); ok && isID(id) {
			bridges[id] = true
			alias, _ := os.ReadFile(filepath.Join("/sys/class/net", ifc.Name, "ifalias"))
			if owner, ok := strings.CutPrefix(trimNL(alias), aliasPrefix); ok && !ownerAlive(owner) {
				stale[id] = true
			}
		}
	}
	for _, ifc := range ifaces {
		if rest, ok := strings.CutPrefix(ifc.Name, vethPrefix); ok && len(rest) > 6 && isID(rest[:6]) && !bridges[rest[:6]] {
			stale[rest[:6]] = true
		}
	}
	for id := range netnsOf {
		if !bridges[id] {
			stale[id] = true
		}
	}
	for id, dir := range dirOf {
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if !bridges[id] && (err != nil || !ownerAlive(string(owner))) {
			stale[id] = true
		}
	}
	for id := range stale {
		var set []nsID
		for _, ns := range netnsOf[id] {
			if nsid, err := nsOfFile(filepath.Join("/run/netns", ns)); err == nil {
				set = append(set, nsid)
			}
		}
		killIn(set)
		bridge := ""
		if bridges[id] {
			bridge = bridgePrefix + id
		}
		msg := "testslurm: removed the leftovers of cluster " + id + ", whose test process died"
		if errs := removeNetwork(id, bridge, netnsOf[id], dirOf[id]); len(errs) > 0 {
			msg += fmt.Sprintf(", but for: %v", errs)
		}
		t.Log(msg)
	}
}
