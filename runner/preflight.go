package runner

import (
	"context"
	"errors"
	"sync"
)

// HostChecker is implemented by spawners that can check, before any rank
// starts, that they can reach hosts (the ssh spawner's preflight). Launch
// calls it once for each distinct host of such a spawner; the error should
// name the host and what went wrong.
type HostChecker interface {
	CheckHosts(ctx context.Context, hosts []string) error
}

// ReachChecker is implemented by HostChecker spawners whose preflight can
// also check the way back: that each host opens a TCP connection to the
// address its ranks will dial (gorun's rendezvous service, already
// listening). Launch calls CheckReach instead of CheckHosts, with addrs
// mapping every host to that host:port. A host that cannot connect makes
// the error hold a *ConnectBackError; a host where no tool to connect with
// is found passes (the ranks' registration tells later, see Launch).
type ReachChecker interface {
	HostChecker
	CheckReach(ctx context.Context, hosts []string, addrs map[string]string) error
}

// checkHosts runs the preflight of every HostChecker spawner once, over
// all of its hosts at once, so that one error lists every unreachable host.
// Where addrOf is not nil, ReachCheckers also check that each host
// connects back to addrOf(host).
func checkHosts(ctx context.Context, hosts []string, spawnerFor func(string) Spawner, addrOf func(string) string) error {
	var checkers []HostChecker
	byChecker := map[HostChecker][]string{}
	for _, h := range hosts {
		hc, ok := spawnerFor(h).(HostChecker)
		if !ok {
			continue
		}
		if _, seen := byChecker[hc]; !seen {
			checkers = append(checkers, hc)
		}
		byChecker[hc] = append(byChecker[hc], h)
	}
	errs := make([]error, len(checkers))
	var wg sync.WaitGroup
	for i, hc := range checkers {
		wg.Go(func() { errs[i] = runCheck(ctx, hc, byChecker[hc], addrOf) }) // "preflight"
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runCheck runs hc's preflight over hosts: CheckReach where hc is a
// ReachChecker and addrOf is given, else CheckHosts.
func runCheck(ctx context.Context, hc HostChecker, hosts []string, addrOf func(string) string) error {
	rc, ok := hc.(ReachChecker)
	if !ok || addrOf == nil {
		return hc.CheckHosts(ctx, hosts)
	}
	addrs := make(map[string]string, len(hosts))
	for _, h := range hosts {
		addrs[h] = addrOf(h)
	}
	return rc.CheckReach(ctx, hosts, addrs)
}
