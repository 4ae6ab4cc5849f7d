package testnet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestOverlapsAny(t *testing.T) {
	used := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	for p, want := range map[string]bool{
		"10.201.7.0/24": true, "11.0.0.0/24": false, "192.0.2.0/24": true, "192.0.3.0/24": false,
	} {
		if got := overlapsAny(netip.MustParsePrefix(p), used); got != want {
			t.Errorf("overlapsAny(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestLocalhostLine(t *testing.T) {
	ours := map[string]bool{"node1": true}
	for line, want := range map[string]string{
		"127.0.0.1\tlocalhost":              "127.0.0.1 localhost",
		"::1 localhost ip6-localhost # x":   "::1 localhost ip6-localhost # x",
		"127.0.1.1 vm":                      "",
		"127.0.0.1 localhost node1":         "",
		"# 127.0.0.1 localhost":             "",
		"ff02::1 ip6-allnodes":              "ff02::1 ip6-allnodes",
		"10.0.0.1 server # localhost later": "",
	} {
		if got := localhostLine(line, ours); got != want {
			t.Errorf("localhostLine(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestHostsFile(t *testing.T) {
	n := &Net{BridgeAddr: "10.201.7.1", Nodes: []Node{{Name: "host1", Addr: "10.201.7.2"}, {Name: "host2", Addr: "10.201.7.3"}}}
	lines := strings.Split(n.HostsFile("launcher"), "\n")
	for _, want := range []string{"10.201.7.2\thost1", "10.201.7.3\thost2"} {
		if !slices.Contains(lines, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "10.201.7.1\tlauncher") }) {
		t.Errorf("hosts file lacks the bridge's line:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.HasSuffix(NSSwitch(), "hosts: files\n") || strings.Count(NSSwitch(), "hosts:") != 1 {
		t.Errorf("NSSwitch:\n%s", NSSwitch())
	}
}

func TestTBFArgs(t *testing.T) {
	got := strings.Join(TBF{Rate: "2gbit"}.Args(), " ")
	if want := "tbf rate 2gbit burst 512kb latency 20ms"; got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
	got = strings.Join(TBF{Rate: "1mbit", Burst: "10kb", Latency: "5ms"}.Args(), " ")
	if want := "tbf rate 1mbit burst 10kb latency 5ms"; got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if a := tcRoot("ns1", "eth0", "del"); strings.Join(a, " ") != "-n ns1 qdisc del dev eth0 root" {
		t.Errorf("tcRoot = %q", a)
	}
}

func TestOwners(t *testing.T) {
	if !OwnerAlive(SelfOwner()) {
		t.Errorf("this process (%s) is not alive", SelfOwner())
	}
	if !OwnerAlive("manual") {
		t.Error("an owner that is no process died")
	}
	dead := strings.Fields(SelfOwner())[0] + " start=0" // this pid, another start: a reused pid
	if OwnerAlive(dead) {
		t.Errorf("%s (a wrong start time) is alive", dead)
	}
	if id := NewID(); !IsID(id) || IsID(id+"0") || IsID("ABCDEF") {
		t.Errorf("IsID: %s", id)
	}
}
