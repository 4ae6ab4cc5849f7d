package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
)

// IsLocalHost reports whether ranks placed on host run on this machine
// (and are started by a LocalSpawner): "localhost", "127.0.0.1", "::1", and
// this machine's host name (os.Hostname), compared case-insensitively.
func IsLocalHost(host string) bool {
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	name, err := os.Hostname()
	return err == nil && strings.EqualFold(host, name)
}

// spawnerFor returns c.SpawnerFor, or the spawners of c.Launcher: by
// default a LocalSpawner for local hosts and one remote (ssh) spawner,
// made on first use, for the others.
func (c Config) spawnerFor() func(host string) Spawner {
	if c.SpawnerFor != nil {
		return c.SpawnerFor
	}
	remote := sync.OnceValue(func() Spawner { return newRemoteSpawner(c) })
	return func(host string) Spawner {
		switch {
		case c.Launcher == SpawnSrun:
			return SrunSpawner{}
		case c.Launcher == SpawnSSH:
			return remote()
		case c.Launcher == SpawnLocal || IsLocalHost(host):
			return LocalSpawner{}
		}
		return remote()
	}
}

// newRemoteSpawner returns the ssh spawner for the hosts that are not local.
func newRemoteSpawner(c Config) Spawner {
	return NewSSHSpawner(SSHConfig{
		Port:           c.SSHPort,
		IdentityFile:   c.SSHIdentityFile,
		ConnectTimeout: c.SSHConnectTimeout,
		ForwardEnv:     c.ForwardEnv,
		GracePeriod:    c.GracePeriod,
	})
}

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
