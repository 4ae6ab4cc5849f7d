package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/shellquote"
	"github.com/gorovod/gorovod/internal/testlab"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"sideways"}, {"up", "-hosts"}, {"down", "extra"}, {"up", "-slots", "0"}} {
		var u usageError
		if err := run(args, &bytes.Buffer{}); !errors.As(err, &u) {
			t.Errorf("lab %q: %v, want a usage error", args, err)
		}
	}
}

func TestEnvLines(t *testing.T) {
	l := &testlab.Lab{
		ID: "abc123", Dir: "/tmp/testlab-abc123", Subnet: "10.201.7.0/24", BridgeAddr: "10.201.7.1", Rate: "2gbit",
		Hosts: []testlab.Host{{Name: "host1", Addr: "10.201.7.2", NetNS: "testlab-abc123-host1"},
			{Name: "host2", Addr: "10.201.7.3", NetNS: "testlab-abc123-host2"}},
		IdentityFile: "/tmp/testlab-abc123/id_ed25519", KnownHosts: "/tmp/testlab-abc123/known_hosts",
		BinDir: "/tmp/testlab-abc123/bin", SSHPort: 22,
	}
	env := envLines(l, 2)
	// What a shell makes of it.
	out, err := exec.Command("sh", "-c", env+`printf '%s|' "$LAB_HOSTS" "$LAB_HOSTS_FLAG" "$LAB_SSH" "$LAB_IFNAME" "$LAB_RATE" $LAB_GORUN_ARGS`).Output()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, env)
	}
	want := "10.201.7.2 10.201.7.3|10.201.7.2:2,10.201.7.3:2|/tmp/testlab-abc123/bin/ssh|eth0|2gbit|" +
		"--bind-addr|10.201.7.1|--ssh-identity-file|/tmp/testlab-abc123/id_ed25519|"
	if string(out) != want {
		t.Errorf("sourced lab.env gives\n%s\nwant\n%s", out, want)
	}
	if got := shellquote.Quote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %s", got)
	}
	if !strings.Contains(env, "LAB_SSH_ARGS='-i /tmp/testlab-abc123/id_ed25519 ") {
		t.Errorf("LAB_SSH_ARGS:\n%s", env)
	}
}
