package launchtest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/testlab"
)

// These tests run gorun in the root network namespace against a lab of
// emulated hosts (internal/testlab) with neither --bind-addr nor
// --network-interface: gorun must find the bridge's address itself, and
// name a host that cannot connect back to it. They need root, sshd and
// iproute2 (testlab.Start skips without them, or fails under
// GOROVOD_REQUIRE_CLUSTER=1).

// labGorunEnv writes an ssh client for gorun that reaches the lab's hosts
// by name (host1, host2: an ssh_config that gives each its HostName, then
// the lab's options and the lines of extra, for every host) and returns the
// environment that puts it first in gorun's PATH. gorun does not resolve
// host1 itself: it finds the address through "ssh -G".
func labGorunEnv(t *testing.T, lab *testlab.Lab, extra ...string) []string {
	t.Helper()
	labConfig, err := os.ReadFile(lab.SSHConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var config strings.Builder
	for _, h := range lab.Hosts {
		fmt.Fprintf(&config, "Host %s\n  HostName %s\n", h.Name, h.Addr)
	}
	config.Write(labConfig)
	for _, line := range extra {
		config.WriteString("  " + line + "\n")
	}
	client, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(path, []byte(config.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s -F %s \"$@\"\n", client, path)
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// labJob returns gorun's command line for 2 ranks on each of two lab
// hosts, named host1 and host2, with no address flag; each rank prints its
// rendezvous address, runs script (with sh) and then execs hello.
func labJob(t *testing.T, lab *testlab.Lab, startTimeout, script string) []string {
	prog := `echo "rdv=$GOROVOD_RENDEZVOUS_ADDR"; ` + script + `; exec "$0"`
	return []string{bin(t, "gorun"), "-np", "4", "-H", lab.Hosts[0].Name + ":2," + lab.Hosts[1].Name + ":2",
		"--ssh-identity-file", lab.IdentityFile, "--start-timeout", startTimeout,
		"/bin/sh", "-c", prog, bin(t, "hello")}
}

// TestNetChoiceAcrossLab: gorun -H host1:2,host2:2 with no --bind-addr
// picks the bridge's address, and the job runs across the lab.
func TestNetChoiceAcrossLab(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2})
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	r := run(t, command(ctx, labGorunEnv(t, lab), labJob(t, lab, "60s", "true")...))
	mustSucceed(t, "gorun across the lab", r)
	if !strings.Contains(r.stdout, "[0]<stdout>: size=4 sum=10") {
		t.Errorf("rank 0 did not report the all-reduce:\n%s", r.stdout)
	}
	for rank := range 4 {
		if want := fmt.Sprintf("[%d]<stdout>: rdv=%s:", rank, lab.BridgeAddr); !strings.Contains(r.stdout, want) {
			t.Errorf("rank %d did not dial the bridge address %s:\n%s", rank, lab.BridgeAddr, r.stdout)
		}
	}
}

// cutOffHost gives gorun a second address on the bridge and makes every
// ssh connection come from it, then makes the bridge's own address
// unreachable from host2 (an "unreachable" route in its namespace) when
// now is set: ssh still works, the way back to the address gorun chooses
// does not. It returns gorun's environment.
func cutOffHost(t *testing.T, lab *testlab.Lab, now bool) []string {
	t.Helper()
	prefix := netip.MustParsePrefix(lab.Subnet)
	b := prefix.Addr().As4()
	b[3] = 250 // hosts have .2 to .201, the bridge .1
	alt := netip.AddrFrom4(b).String()
	if out, err := exec.Command("ip", "addr", "add", alt+"/32", "dev", lab.Bridge).CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s: %v\n%s", alt, err, out)
	}
	if now {
		cmd := lab.Command(t.Context(), 1, "ip", "route", "add", "unreachable", lab.BridgeAddr+"/32")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cutting host2 off: %v\n%s", err, out)
		}
	}
	return labGorunEnv(t, lab, "BindAddress "+alt)
}

// wantConnectBackError checks that gorun failed with the error that names
// host2, the address it tried and both flags, and not host1.
func wantConnectBackError(t *testing.T, lab *testlab.Lab, r result, reason string) {
	t.Helper()
	want := "gorun: host " + lab.Hosts[1].Name + " cannot connect back to gorun at " + lab.BridgeAddr + ":"
	switch {
	case r.code != 2:
		t.Errorf("exit status %d, want 2", r.code)
	case !strings.Contains(r.stderr, want):
		t.Errorf("stderr does not say %q", want)
	case !strings.Contains(r.stderr, reason):
		t.Errorf("stderr does not give the reason %q", reason)
	case !strings.Contains(r.stderr, "give gorun --bind-addr with an address of this machine that "+lab.Hosts[1].Name+
		" can reach, or --network-interface with the interface that leads to it"):
		t.Errorf("stderr does not name the flags")
	case strings.Contains(r.stderr, "host "+lab.Hosts[0].Name+" cannot"):
		t.Errorf("host1, which reaches gorun, is named too")
	default:
		return
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}

// TestNetChoiceHostCannotConnectBack: a host that answers ssh but cannot
// reach the chosen address fails the launch before any rank starts,
// naming the host, the address and the flags.
func TestNetChoiceHostCannotConnectBack(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2})
	env := cutOffHost(t, lab, true)
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	r := run(t, command(ctx, env, labJob(t, lab, "60s", "true")...))
	wantConnectBackError(t, lab, r, "No route to host")
	if strings.Contains(r.stdout, "rdv=") {
		t.Errorf("ranks started:\n%s", r.stdout)
	}
}

// TestNetChoiceRanksCannotRegister: when the way back breaks after the
// preflight (the ranks of host2 cut it off themselves before they start),
// the ranks start but never register, and gorun names the host, the
// address and the flags above the failure that ended the job, whose exit
// status it keeps (the host may only have been slow).
func TestNetChoiceRanksCannotRegister(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2})
	env := cutOffHost(t, lab, false)
	cut := fmt.Sprintf(`if [ "$(hostname)" = %s ]; then ip route add unreachable %s/32 2>/dev/null || true; fi`,
		lab.Hosts[1].Name, lab.BridgeAddr)
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	r := run(t, command(ctx, env, labJob(t, lab, "15s", cut)...))
	want := "gorun: no rank on host " + lab.Hosts[1].Name + " registered within the start timeout (15s); if they cannot connect back to gorun at " +
		lab.BridgeAddr + ":"
	switch {
	case r.code == 0 || r.code == 2:
		t.Errorf("exit status %d, want the failed job's own", r.code)
	case !strings.Contains(r.stderr, want):
		t.Errorf("stderr does not say %q", want)
	case !strings.Contains(r.stderr, "give gorun --bind-addr with an address of this machine that "+lab.Hosts[1].Name+" can reach"):
		t.Errorf("stderr does not name the flags")
	case strings.Contains(r.stderr, "host "+lab.Hosts[0].Name+" registered"):
		t.Errorf("host1, whose ranks registered, is named too")
	default:
		return
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}
