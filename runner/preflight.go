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

// checkHosts runs the preflight of every HostChecker spawner once, over
// all of its hosts at once, so that one error lists every unreachable host.
func checkHosts(ctx context.Context, hosts []string, spawnerFor func(string) Spawner) error {
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
		wg.Go(func() { errs[i] = hc.CheckHosts(ctx, byChecker[hc]) }) // "preflight"
	}
	wg.Wait()
	return errors.Join(errs...)
}
