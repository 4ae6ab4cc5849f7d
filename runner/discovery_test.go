package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDiscovered(t *testing.T) {
	hosts, err := parseDiscovered("# hosts\nnode1:4\n\n  node2  \n[fe80::1]:2\n10.0.0.5\n", 3, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := hostList(hosts); got != "node1:4, node2:3, [fe80::1]:2, 10.0.0.5:3" {
		t.Errorf("hosts %s", got)
	}
	if hosts, err := parseDiscovered("\n# nothing now\n", 1, "s"); err != nil || len(hosts) != 0 {
		t.Errorf("no hosts: %v, %v", hosts, err)
	}
	for _, c := range []struct{ out, want string }{
		{"node1:4\nnode1:2\n", `line 2: host "node1" is also on line 1`},
		{"node1:x\n", `line 1 "node1:x": slot count "x" is not a positive integer`},
		{"a b\n", `line 1 "a b"`},
		{"node1:0\n", `line 1 "node1:0"`},
	} {
		if _, err := parseDiscovered(c.out, 1, "s"); !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want ErrDiscovery with %q", c.out, err, c.want)
		}
	}
}

// TestDiscoverHostsScript: a script's exit status and output decide; a
// failing one is an error quoting what it printed, never "no hosts".
func TestDiscoverHostsScript(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hosts, err := DiscoverHosts(context.Background(), script("ok", "echo a:2; echo b\n"), 2)
	if err != nil || hostList(hosts) != "a:2, b:2" {
		t.Fatalf("hosts %v, %v", hosts, err)
	}
	_, err = DiscoverHosts(context.Background(), script("fail", "echo partial:1; echo 'no cloud API' >&2; exit 3\n"), 1)
	if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), `"partial:1\n"`) || !strings.Contains(err.Error(), "no cloud API") {
		t.Errorf("failing script: %v", err)
	}
	if _, err := DiscoverHosts(context.Background(), filepath.Join(dir, "missing"), 1); !errors.Is(err, ErrDiscovery) {
		t.Errorf("missing script: %v", err)
	}
}
