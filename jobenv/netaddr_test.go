package jobenv

import (
	"net/netip"
	"strings"
	"testing"
)

// TestDataPlaneHost pins the rules a worker uses to pick its data-plane
// address on this machine: an explicit address wins, an interface name
// gives that interface's address, a loopback rendezvous gives loopback,
// and a job on one host keeps the route to its rendezvous.
func TestDataPlaneHost(t *testing.T) {
	for _, c := range []struct {
		bind, rdv string
		allLocal  bool
		hints     []string
		want      string
	}{
		{"10.1.2.3", "127.0.0.1:5000", false, nil, "10.1.2.3"},
		{"lo", "127.0.0.1:5000", false, nil, "127.0.0.1"},
		{"", "127.0.0.1:5000", false, []string{"127.0.0.1"}, "127.0.0.1"},
		{"", "localhost:5000", false, nil, "127.0.0.1"},
		{"", "127.0.1.1:5000", true, nil, "127.0.0.1"},
	} {
		got, err := DataPlaneHost(c.bind, c.rdv, c.allLocal, c.hints)
		if err != nil || got != c.want {
			t.Errorf("DataPlaneHost(%q, %q, %v, %v) = %q, %v; want %q", c.bind, c.rdv, c.allLocal, c.hints, got, err, c.want)
		}
	}
	if _, err := DataPlaneHost("", "no-port", false, nil); err == nil {
		t.Error("a rendezvous address without a port: no error")
	}
}

// TestRouteAway: hosts reached over loopback are passed over for an
// interface that is up (other hosts can reach it), and a strict search
// stops at the first host.
func TestRouteAway(t *testing.T) {
	want := netip.MustParseAddr("127.0.0.1")
	if up, ok := UpAddr(); ok {
		want = up
	}
	got, err := RouteAway([]string{"127.0.0.1", "localhost"}, false)
	if err != nil || got != want {
		t.Fatalf("RouteAway over loopback hosts = %v, %v; want %v", got, err, want)
	}
	if _, err := RouteAway([]string{"no-such-host.invalid", "127.0.0.1"}, true); err == nil {
		t.Fatal("strict: an unresolvable first host gave no error")
	}
	if got, err := RouteAway([]string{"no-such-host.invalid", "127.0.0.1"}, false); err != nil || got != want {
		t.Fatalf("lenient: %v, %v; want %v", got, err, want)
	}
}

// TestDataPlaneHostAuto: with no GOROVOD_BIND_ADDR a rank listens on the
// interface of its route to the rendezvous; on gorun's own machine, where
// the rendezvous has an address of an interface that is up, that address
// itself (not loopback, not the first interface), whatever the hints say.
// A GOROVOD_BIND_ADDR that names no interface and no host is an error
// naming the variable.
func TestDataPlaneHostAuto(t *testing.T) {
	if up, ok := UpAddr(); ok {
		rdv := netip.AddrPortFrom(up, 5000).String()
		if got, err := DataPlaneHost("", rdv, false, []string{"127.0.0.1"}); err != nil || got != up.String() {
			t.Errorf("rendezvous at %s: DataPlaneHost = %q, %v; want %s", rdv, got, err, up)
		}
	}
	_, err := DataPlaneHost("no-such-if0", "127.0.0.1:5000", false, nil)
	if err == nil || !strings.HasPrefix(err.Error(), EnvBindAddr+"=no-such-if0 is neither a network interface of this host") {
		t.Errorf("unknown interface: %v", err)
	}
}
