package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/gorovod/gorovod/jobenv"
)

// This file chooses where gorun's rendezvous service listens and which
// address each host dials when no --bind-addr or --network-interface is
// given: the local address of this machine's route to each remote host
// (Config.netPlan). Whether every host really reaches it is checked during
// start-up (netchoice_check.go).

// routeParallel bounds how many hosts' routes are looked up at once.
const routeParallel = 64

// netPlan says where the rendezvous service listens and which address the
// ranks of each host dial.
type netPlan struct {
	// listen is the address the rendezvous service listens on; port 0
	// picks a free one.
	listen string
	// auto is set when the addresses below were chosen by route lookups;
	// otherwise every rank dials the service's own address.
	auto bool
	// dial maps each remote host to the address its ranks dial (auto).
	dial map[string]netip.Addr
	// local is the address of the ranks of this machine, and of any host
	// missing from dial (auto).
	local netip.Addr
}

// routeResult is the outcome of one host's route lookup.
type routeResult struct {
	host string
	addr netip.Addr // the local address of the route; invalid on error
	err  error
}

// hostResolver is implemented by spawners that know which network address
// stands behind a host name (ssh: the HostName of ssh's configuration),
// so that the route is looked up to where the spawner really connects.
type hostResolver interface {
	// resolveHost returns the name or address to look the route of host
	// up with, or "" to use host itself.
	resolveHost(ctx context.Context, host string) string
}

// netPlan works out the rendezvous addresses of a job on slots: BindAddr,
// else the address of NetworkInterface, else (srun) the route to the
// nodes, else 127.0.0.1 when every host is this machine; otherwise it
// looks up this machine's route to every remote host (see chooseRoutes).
func (c Config) netPlan(ctx context.Context, slots []Slot, spawnerFor func(string) Spawner) (netPlan, error) {
	remote := remoteHosts(slots)
	if c.BindAddr != "" || c.NetworkInterface != "" || c.Launcher == SpawnSrun || len(remote) == 0 {
		listen, err := c.listenAddr()
		return netPlan{listen: listen}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.StartTimeout)
	defer cancel()
	return chooseRoutes(lookupRoutes(ctx, remote, func(ctx context.Context, host string) (netip.Addr, error) {
		target := host
		if r, ok := spawnerFor(host).(hostResolver); ok {
			if t := r.resolveHost(ctx, host); t != "" {
				target = t
			}
		}
		return jobenv.RouteAddrContext(ctx, target)
	}))
}

// remoteHosts returns the hosts of slots that are not this machine
// (IsLocalHost), each once, in order.
func remoteHosts(slots []Slot) []string {
	var hosts []string
	for _, h := range UsedHosts(slots) {
		if !IsLocalHost(h.Name) {
			hosts = append(hosts, h.Name)
		}
	}
	return hosts
}

// lookupRoutes runs route for every host, routeParallel at a time, and
// returns the results in the order of hosts.
func lookupRoutes(ctx context.Context, hosts []string, route func(context.Context, string) (netip.Addr, error)) []routeResult {
	results := make([]routeResult, len(hosts))
	inParallel(len(hosts), routeParallel, func(i int) {
		addr, err := route(ctx, hosts[i])
		results[i] = routeResult{host: hosts[i], addr: addr, err: err}
	})
	return results
}

// inParallel calls f(0) ... f(n-1), at most limit at a time, and returns
// when every call has.
func inParallel(n, limit int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, limit) {
		wg.Go(func() { // "in-parallel": ends when next is closed
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// chooseRoutes turns the route lookups of the remote hosts into a plan.
//
// Routes that are loopback lead to this machine under another name: any
// address of it serves them. Among the others, when every host's route
// has the same local address A (one network carries the job), the service
// listens on A and every rank dials A. When they differ (this machine
// reaches the hosts over several networks), no single address of it need
// be reachable from all of them, so the service listens on the wildcard
// address, on every interface, and the ranks of each host dial the address
// of this machine's route to that host: the address that host's packets
// come back to. (Listening on each chosen address instead would need one
// listener per address for one service; the handshake that every
// connection starts with keeps strangers out either way.) Ranks on this
// machine, and hosts whose route could not be found, dial the first
// host's address; the start-up check (CheckReach, or the registrations)
// tells whether the latter really reach it.
//
// Where no remote host has a route other than loopback, every host is this
// machine (127.0.0.1), unless some route could not be found at all: that
// is an error naming those hosts and the flags that set the address.
func chooseRoutes(results []routeResult) (netPlan, error) {
	var distinct []netip.Addr
	var failed []error
	for _, r := range results {
		switch {
		case r.err != nil:
			failed = append(failed, routeError(r.host, r.err))
		case !r.addr.IsLoopback() && !slices.Contains(distinct, r.addr):
			distinct = append(distinct, r.addr)
		}
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	switch {
	case len(distinct) == 0 && failed != nil:
		return netPlan{}, errors.Join(failed...)
	case len(distinct) == 0:
		return netPlan{listen: "127.0.0.1:0", auto: true, local: loopback}, nil
	}
	p := netPlan{auto: true, local: distinct[0], dial: make(map[string]netip.Addr, len(results))}
	p.listen = net.JoinHostPort(distinct[0].String(), "0")
	if len(distinct) > 1 {
		p.listen = ":0"
	}
	for _, r := range results {
		p.dial[r.host] = p.local
		if r.err == nil && !r.addr.IsLoopback() {
			p.dial[r.host] = r.addr
		}
	}
	return p, nil
}

// routeError says that no route to host could be found, and what to do.
func routeError(host string, err error) error {
	return fmt.Errorf("%w: cannot find this machine's route to host %s (%w); give gorun --bind-addr with an address of this machine that %s can reach, or --network-interface with the interface that leads to it",
		ErrConfig, host, err, host)
}

// addrFor returns the address that the ranks of host dial, given the
// address the rendezvous service listens on (with its real port).
func (p netPlan) addrFor(host, serviceAddr string) string {
	if !p.auto {
		return serviceAddr
	}
	_, port, err := net.SplitHostPort(serviceAddr)
	if err != nil {
		return serviceAddr
	}
	ip, ok := p.dial[host]
	if !ok {
		ip = p.local
	}
	return net.JoinHostPort(ip.String(), port)
}

// perHost reports whether hosts dial different addresses: the job's shared
// environment then does not hold the right one for every host.
func (p netPlan) perHost() bool {
	for _, ip := range p.dial {
		if ip != p.local {
			return true
		}
	}
	return false
}

// log records at info level (gorun shows it with --verbose) the address
// that each remote host dials, which the preflight checks next.
func (p netPlan) log(log *slog.Logger, serviceAddr string, hosts []string) {
	how := "given"
	if p.auto {
		how = "route lookup"
	}
	for _, h := range hosts {
		log.Info("gorun: rendezvous address (the preflight checks that the host connects to it; the service logs that as a rejected connection)",
			"host", h, "addr", p.addrFor(h, serviceAddr), "chosen_by", how)
	}
}

// withHostAddrs wraps spawnerFor so that the ranks of each host get the
// rendezvous address that plan gives that host, where hosts dial
// different addresses; otherwise it returns spawnerFor.
func withHostAddrs(spawnerFor func(string) Spawner, plan netPlan, serviceAddr string) func(string) Spawner {
	if !plan.perHost() {
		return spawnerFor
	}
	return func(host string) Spawner {
		return hostAddrSpawner{Spawner: spawnerFor(host), addr: plan.addrFor(host, serviceAddr)}
	}
}

// hostAddrSpawner sets the rendezvous address of the ranks it starts.
type hostAddrSpawner struct {
	Spawner
	addr string
}

// Spawn starts c with GOROVOD_RENDEZVOUS_ADDR set to s.addr.
func (s hostAddrSpawner) Spawn(ctx context.Context, slot Slot, c Command, stdout, stderr io.Writer) (Process, error) {
	env := make([]string, 0, len(c.Env)+1)
	for _, kv := range c.Env {
		if !strings.HasPrefix(kv, jobenv.EnvRendezvousAddr+"=") {
			env = append(env, kv)
		}
	}
	c.Env = append(env, jobenv.EnvRendezvousAddr+"="+s.addr)
	return s.Spawner.Spawn(ctx, slot, c, stdout, stderr)
}
