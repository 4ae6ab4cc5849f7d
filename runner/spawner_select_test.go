package runner

import "testing"

func TestDefaultSpawnerFor(t *testing.T) {
	pick := DefaultConfig().spawnerFor()
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, ok := pick(host).(LocalSpawner); !ok {
			t.Errorf("%s: spawner %T, want LocalSpawner", host, pick(host))
		}
	}
	remote := pick("node1")
	if _, ok := remote.(LocalSpawner); ok || remote == nil {
		t.Fatalf("node1: spawner %T, want the ssh spawner", remote)
	}
	if _, ok := remote.(HostChecker); !ok {
		t.Errorf("the ssh spawner %T is no HostChecker", remote)
	}
	if pick("node2") != remote {
		t.Errorf("remote hosts got different spawners")
	}
}
