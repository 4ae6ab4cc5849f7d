package runner

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// routes is a shorthand for route lookups: "host=addr", or "host!" for a
// lookup that failed.
func routes(specs ...string) []routeResult {
	rs := make([]routeResult, len(specs))
	for i, s := range specs {
		if host, ok := strings.CutSuffix(s, "!"); ok {
			rs[i] = routeResult{host: host, err: errors.New("lookup " + host + ": no such host")}
			continue
		}
		host, addr, _ := strings.Cut(s, "=")
		rs[i] = routeResult{host: host, addr: netip.MustParseAddr(addr)}
	}
	return rs
}

// TestChooseRoutes pins the choice among the route lookups: one common
// address is listened on and dialed by all; differing ones make the
// service listen on every interface and each host dial its own; loopback
// routes (this machine under another name) and hosts without a route take
// the first host's address.
func TestChooseRoutes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		results []routeResult
		listen  string
		dial    string // host=addr of every host, in order, for the service on port 7
	}{
		{"one network", routes("a=10.0.0.1", "b=10.0.0.1"), "10.0.0.1:0", "a=10.0.0.1:7 b=10.0.0.1:7"},
		{"two networks", routes("a=10.0.0.1", "b=10.1.0.1", "c=10.0.0.1"), ":0", "a=10.0.0.1:7 b=10.1.0.1:7 c=10.0.0.1:7"},
		{"loopback only", routes("127.0.0.2=127.0.0.1", "me=127.0.0.1"), "127.0.0.1:0", "127.0.0.2=127.0.0.1:7 me=127.0.0.1:7"},
		{"loopback and network", routes("me=127.0.0.1", "b=10.0.0.1"), "10.0.0.1:0", "me=10.0.0.1:7 b=10.0.0.1:7"},
		{"one without a route", routes("a!", "b=10.0.0.1"), "10.0.0.1:0", "a=10.0.0.1:7 b=10.0.0.1:7"},
		{"ipv6", routes("a=fd00::2", "b=fd00::2"), "[fd00::2]:0", "a=[fd00::2]:7 b=[fd00::2]:7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := chooseRoutes(tt.results)
			if err != nil {
				t.Fatal(err)
			}
			var dial []string
			for _, r := range tt.results {
				dial = append(dial, r.host+"="+p.addrFor(r.host, "[::]:7"))
			}
			if p.listen != tt.listen || strings.Join(dial, " ") != tt.dial {
				t.Errorf("listen %q, dial %q; want %q, %q", p.listen, strings.Join(dial, " "), tt.listen, tt.dial)
			}
			if got, first := p.addrFor("", "[::]:7"), dial[0]; !strings.HasSuffix(first, "="+got) {
				t.Errorf("local ranks dial %q, not the first host's address (%s)", got, first)
			}
			if p.perHost() != (tt.listen == ":0") {
				t.Errorf("perHost = %v with listen %q", p.perHost(), p.listen)
			}
		})
	}
}

// TestChooseRoutesNoAddress: without any route but loopback, a host whose
// route could not be found is an error naming it and both flags.
func TestChooseRoutesNoAddress(t *testing.T) {
	for _, results := range [][]routeResult{routes("a!"), routes("me=127.0.0.1", "a!")} {
		_, err := chooseRoutes(results)
		want := "runner: bad configuration: cannot find this machine's route to host a (lookup a: no such host); " +
			"give gorun --bind-addr with an address of this machine that a can reach, or --network-interface with the interface that leads to it"
		if !errors.Is(err, ErrConfig) || err.Error() != want {
			t.Errorf("chooseRoutes(%v) = %v, want %q", results, err, want)
		}
	}
}

// TestNetPlanLoopbackAliases looks real routes up: hosts on loopback
// aliases (127.0.0.2, 127.0.0.3) are this machine, so the job keeps
// 127.0.0.1; a host that no resolver knows is an error.
func TestNetPlanLoopbackAliases(t *testing.T) {
	cfg := jobOf(t, "127.0.0.2:1,127.0.0.3:1,localhost:1", 3)
	cfg.BindAddr = ""
	slots, err := Assign(cfg.hosts(), cfg.NP)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.netPlan(t.Context(), slots, LocalSpawner{}.spawnerFor)
	if err != nil || p.listen != "127.0.0.1:0" || p.addrFor("127.0.0.3", "127.0.0.1:9") != "127.0.0.1:9" {
		t.Errorf("netPlan = %+v, %v; want the loopback address", p, err)
	}
	cfg = jobOf(t, "no-such-host.invalid:1,localhost:1", 2)
	cfg.BindAddr = ""
	slots, _ = Assign(cfg.hosts(), cfg.NP)
	_, err = cfg.netPlan(t.Context(), slots, LocalSpawner{}.spawnerFor)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "route to host no-such-host.invalid") ||
		!strings.Contains(err.Error(), "--bind-addr") || !strings.Contains(err.Error(), "--network-interface") {
		t.Errorf("unknown host: %v, want an error naming it and the flags", err)
	}
}

// spawnerFor gives l for every host.
func (l LocalSpawner) spawnerFor(string) Spawner { return l }

// aliasSpawner resolves host names as ssh's configuration would.
type aliasSpawner struct {
	LocalSpawner
	names map[string]string
}

func (a aliasSpawner) resolveHost(_ context.Context, host string) string { return a.names[host] }

// TestNetPlanResolver: the route is looked up to the address the spawner
// says stands behind a name, not to the name.
func TestNetPlanResolver(t *testing.T) {
	cfg := jobOf(t, "node-alias:1,localhost:1", 2)
	cfg.BindAddr = ""
	slots, _ := Assign(cfg.hosts(), cfg.NP)
	sp := aliasSpawner{names: map[string]string{"node-alias": "127.0.0.5"}}
	p, err := cfg.netPlan(t.Context(), slots, func(string) Spawner { return sp })
	if err != nil || p.listen != "127.0.0.1:0" {
		t.Errorf("netPlan = %+v, %v; want the loopback route of 127.0.0.5", p, err)
	}
}

// TestNetPlanOverrides: --bind-addr, --network-interface and srun keep
// their own address, and an all-local job 127.0.0.1.
func TestNetPlanOverrides(t *testing.T) {
	for _, tt := range []struct {
		change func(c *Config)
		want   string
	}{
		{func(c *Config) { c.BindAddr = "10.9.9.9" }, "10.9.9.9:0"},
		{func(c *Config) { c.BindAddr, c.NetworkInterface = "", "lo" }, "127.0.0.1:0"},
		{func(c *Config) { c.BindAddr, c.Hosts = "", []Host{{Name: "localhost", Slots: 2}} }, "127.0.0.1:0"},
	} {
		cfg := jobOf(t, "node9:1,localhost:1", 2)
		tt.change(&cfg)
		slots, _ := Assign(cfg.hosts(), cfg.NP)
		p, err := cfg.netPlan(t.Context(), slots, LocalSpawner{}.spawnerFor)
		if err != nil || p.listen != tt.want || p.auto || p.addrFor("node9", "10.9.9.9:5") != "10.9.9.9:5" {
			t.Errorf("netPlan = %+v, %v; want %s as given", p, err, tt.want)
		}
	}
}

// TestNetworkInterfaceErrors: a --network-interface that this machine does
// not have, or that has no address other hosts can dial, is an error
// naming the flag.
func TestNetworkInterfaceErrors(t *testing.T) {
	_, err := Config{NetworkInterface: "no-such-if0"}.listenAddr()
	if !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(),
		"runner: bad configuration: --network-interface no-such-if0: this machine has no such interface (it has ") {
		t.Errorf("missing interface: %v", err)
	}
	ifcs, _ := net.Interfaces()
	for _, ifc := range ifcs {
		if _, err := jobenv.InterfaceAddr(ifc.Name); err == nil {
			continue
		}
		_, err := Config{NetworkInterface: ifc.Name}.listenAddr()
		want := "runner: bad configuration: --network-interface " + ifc.Name +
			": the interface has no IPv4 address (nor a global IPv6 one) that other hosts can dial"
		if !errors.Is(err, ErrConfig) || err.Error() != want {
			t.Errorf("interface without an address: %v, want %q", err, want)
		}
		return
	}
	t.Log("every interface has an address: the case without one is not tested here")
}

// TestBindAddrNotLocal: Launch with a --bind-addr that is not an address
// of this machine fails before any rank starts, naming the flag.
func TestBindAddrNotLocal(t *testing.T) {
	f := newFakeSpawner(t)
	cfg := fakeConfig(t, f, "a:1", 1, io.Discard)
	cfg.BindAddr = "198.51.100.7"
	err := await(t, launchAsync(t.Context(), cfg), 10*time.Second)
	want := "runner: bad configuration: --bind-addr 198.51.100.7: not an address of this machine (listen tcp 198.51.100.7:0: bind: cannot assign requested address)"
	if !errors.Is(err, ErrConfig) || err == nil || err.Error() != want {
		t.Errorf("Launch = %v, want %q", err, want)
	}
	if f.proc(0) != nil {
		t.Error("a rank started")
	}
}

// reachSpawner is a fake whose preflight checks the way back: it records
// the addresses it was given and fails for host "bad".
type reachSpawner struct {
	*fakeSpawner
	addrs chan map[string]string
}

func (r reachSpawner) CheckHosts(context.Context, []string) error {
	return errors.New("CheckHosts called instead of CheckReach")
}

func (r reachSpawner) CheckReach(_ context.Context, hosts []string, addrs map[string]string) error {
	r.addrs <- addrs
	if slices.Contains(hosts, "bad") {
		return &ConnectBackError{Host: "bad", Addr: addrs["bad"], Reason: "connection refused"}
	}
	return nil
}

// TestLaunchChecksConnectBack: Launch gives a ReachChecker every host's
// address of the rendezvous, already listening, and a host that cannot
// connect back fails the job before any rank starts.
func TestLaunchChecksConnectBack(t *testing.T) {
	f := newFakeSpawner(t)
	rs := reachSpawner{fakeSpawner: f, addrs: make(chan map[string]string, 1)}
	cfg := fakeConfig(t, f, "good:1,bad:1", 2, &testutil.SyncBuffer{})
	cfg.SpawnerFor = func(string) Spawner { return rs }
	err := await(t, launchAsync(t.Context(), cfg), 10*time.Second)
	addrs := <-rs.addrs
	addr := addrs["bad"]
	if len(addrs) != 2 || addrs["good"] != addr || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("CheckReach got %v, want both hosts at the rendezvous address", addrs)
	}
	want := "runner: host bad cannot connect back to gorun at " + addr + ": connection refused; " +
		"give gorun --bind-addr with an address of this machine that bad can reach, or --network-interface with the interface that leads to it"
	if _, ok := errors.AsType[*ConnectBackError](err); !ok || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Errorf("Launch = %v, want %q", err, want)
	}
	if f.proc(0) != nil {
		t.Error("a rank started despite the failed check")
	}
}

// TestHostAddrSpawner: where hosts dial different addresses, each rank's
// environment holds its host's.
func TestHostAddrSpawner(t *testing.T) {
	f := newFakeSpawner(t)
	plan, _ := chooseRoutes(routes("a=10.0.0.1", "b=10.1.0.1"))
	spawnerFor := withHostAddrs(f.spawnerFor, plan, "[::]:4000")
	c := Command{Argv: []string{"x"}, Env: []string{"A=1", jobenv.EnvRendezvousAddr + "=10.0.0.1:4000", "B=2"}}
	if _, err := spawnerFor("b").Spawn(t.Context(), Slot{Rank: 1, Host: "b"}, c, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.cmd(1).Env, " ")
	if want := "A=1 B=2 " + jobenv.EnvRendezvousAddr + "=10.1.0.1:4000"; got != want {
		t.Errorf("env %q, want %q", got, want)
	}
	one, _ := chooseRoutes(routes("a=10.0.0.1", "b=10.0.0.1"))
	if _, wrapped := withHostAddrs(f.spawnerFor, one, "10.0.0.1:4000")("b").(hostAddrSpawner); wrapped {
		t.Error("one common address: the spawner was wrapped")
	}
}

// fakeRegistrations is a rendezvous as unregisteredHosts sees it.
type fakeRegistrations struct {
	round   int
	missing []rendezvous.Peer
	size    int
}

func (f fakeRegistrations) Registered() int            { return f.size - len(f.missing) }
func (f fakeRegistrations) Missing() []rendezvous.Peer { return f.missing }
func (f fakeRegistrations) Round() int                 { return f.round }

// TestUnregisteredHosts: a failed job in which a remote host's ranks never
// registered, past the start timeout, names that host, its address and
// the flags before the failure; other failures are left alone.
func TestUnregisteredHosts(t *testing.T) {
	slots, _ := Assign([]Host{{Name: "localhost", Slots: 1}, {Name: "h1", Slots: 2}, {Name: "h2", Slots: 2}}, 5)
	addrOf := func(h string) string { return "10.0.0.1:4000" }
	jobErr := &ExitError{Rank: 3, Host: "h2", Status: 1}
	h2Missing := fakeRegistrations{round: 1, size: 5, missing: []rendezvous.Peer{{Rank: 3, Host: "h2"}, {Rank: 4, Host: "h2"}}}
	err := unregisteredHosts(jobErr, h2Missing, slots, addrOf, time.Minute, 30*time.Second)
	want := "runner: no rank on host h2 registered within the start timeout (30s); if they cannot connect back to gorun at 10.0.0.1:4000, " +
		"give gorun --bind-addr with an address of this machine that h2 can reach, or --network-interface with the interface that leads to it\n" +
		"runner: rank 3 on h2 exited with status 1"
	if err == nil || err.Error() != want || !errors.Is(err, jobErr) || errors.Is(err, ErrConfig) {
		t.Errorf("unregisteredHosts = %v, want\n%s", err, want)
	}
	oneOfTwo := fakeRegistrations{round: 1, size: 5, missing: []rendezvous.Peer{{Rank: 3, Host: "h2"}}}
	localMissing := fakeRegistrations{round: 1, size: 5, missing: []rendezvous.Peer{{Rank: 0, Host: "localhost"}}}
	nobody := fakeRegistrations{round: 1, size: 5, missing: slices.Concat(h2Missing.missing,
		[]rendezvous.Peer{{Rank: 0, Host: "localhost"}, {Rank: 1, Host: "h1"}, {Rank: 2, Host: "h1"}})}
	for _, tt := range []struct {
		name    string
		err     error
		srv     fakeRegistrations
		elapsed time.Duration
	}{
		{"before the start timeout", jobErr, h2Missing, 10 * time.Second},
		{"interrupted", ErrInterrupted, h2Missing, time.Minute},
		{"a later round", jobErr, fakeRegistrations{round: 2, size: 5, missing: h2Missing.missing}, time.Minute},
		{"one rank of the host registered", jobErr, oneOfTwo, time.Minute},
		{"a local host", jobErr, localMissing, time.Minute},
		{"nobody registered", jobErr, nobody, time.Minute},
		{"success", nil, h2Missing, time.Minute},
	} {
		if got := unregisteredHosts(tt.err, tt.srv, slots, addrOf, tt.elapsed, 30*time.Second); got != tt.err {
			t.Errorf("%s: unregisteredHosts = %v, want the job's error as it is", tt.name, got)
		}
	}
}
