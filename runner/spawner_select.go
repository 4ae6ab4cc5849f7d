package runner

import (
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
