package runner

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner/internal/testsshd"
)

// TestCheckReach runs the probe through ssh: a host connects back to an
// address that listens, and one that does not gives a *ConnectBackError
// naming the host, the address and the flags, with the host's own reason.
func TestCheckReach(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// Each probe's connection may take ConnectTimeout, its ssh session
		// three times that: with 5 s, a loaded CI run (two busy loops
		// beside it) once saw both probes of the real sshd time out.
		// Neither case here waits that long when it passes.
		tg.cfg.ConnectTimeout = 30 * time.Second
		sp := NewSSHSpawner(tg.cfg).(ReachChecker)
		closed := ln.Addr().String()
		err = sp.CheckReach(t.Context(), []string{tg.host}, map[string]string{tg.host: closed})
		if ln.Close(); err != nil {
			t.Errorf("CheckReach(listening address) = %v", err)
		}
		err = sp.CheckReach(t.Context(), []string{tg.host, tg.host}, map[string]string{tg.host: closed})
		ce, ok := errors.AsType[*ConnectBackError](err)
		if !ok || ce.Host != tg.host || ce.Addr != closed || ce.Reason != "Connection refused" {
			t.Fatalf("CheckReach(closed port) = %v (%T), want a *ConnectBackError for %s at %s", err, err, tg.host, closed)
		}
		for _, want := range []string{"host " + tg.host + " cannot connect back to gorun at " + closed, "--bind-addr", "--network-interface"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if n := strings.Count(err.Error(), "\n"); n != 0 {
			t.Errorf("a host listed twice was checked twice:\n%v", err)
		}
	})
}

// TestCheckReachSSHFailure: a host that ssh cannot reach is reported as
// CheckHosts reports it, beside the hosts that cannot connect back.
func TestCheckReachSSHFailure(t *testing.T) {
	t.Parallel()
	tg := sshdTarget(t)
	closed := "127.0.0.1:1" // refused: a port below 1024 that nothing here serves
	err := NewSSHSpawner(tg.cfg).(ReachChecker).CheckReach(t.Context(), []string{"127.0.0.3", tg.host},
		map[string]string{"127.0.0.3": closed, tg.host: closed})
	if _, ok := errors.AsType[*SSHCheckError](err); !ok {
		t.Fatalf("err = %v, want an *SSHCheckError", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || lines[0] != "runner: cannot reach 1 host over ssh:" ||
		!strings.HasPrefix(lines[1], "  127.0.0.3: ssh: connect to host 127.0.0.3") ||
		!strings.HasPrefix(lines[2], "runner: host "+tg.host+" cannot connect back to gorun at "+closed+": ") {
		t.Errorf("err =\n%v\nwant the ssh failure, then the host that cannot connect back", err)
	}
}

// TestCheckReachNoTool: a host without bash, nc or python3 passes (the
// ranks' registration tells instead).
func TestCheckReachNoTool(t *testing.T) {
	tg := fakeSSHTarget(t)
	t.Setenv("PATH", t.TempDir()) // the fake's remote shell finds no tool
	err := NewSSHSpawner(tg.cfg).(ReachChecker).CheckReach(t.Context(), []string{tg.host},
		map[string]string{tg.host: "127.0.0.1:1"})
	if err != nil {
		t.Errorf("CheckReach without a tool = %v, want nil", err)
	}
}

// TestCheckReachTimeout: a connection that does not come within the ssh
// connect timeout is reported as such (a bash that hangs stands for a
// firewall that drops packets; coreutils' timeout bounds it).
func TestCheckReachTimeout(t *testing.T) {
	tg := fakeSSHTarget(t)
	tg.cfg.ConnectTimeout = time.Second
	timeoutPath, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("coreutils' timeout is not installed")
	}
	dir := t.TempDir()
	if err := os.Symlink(timeoutPath, filepath.Join(dir, "timeout")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bash"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	err = NewSSHSpawner(tg.cfg).(ReachChecker).CheckReach(t.Context(), []string{tg.host},
		map[string]string{tg.host: "127.0.0.1:1"})
	if ce, ok := errors.AsType[*ConnectBackError](err); !ok || ce.Reason != "no connection within 1s" {
		t.Errorf("CheckReach to a silent address = %v, want no connection within 1s", err)
	}
}

// TestResolveHostOutputBounded: an ssh whose -G prints without end is
// stopped once its output passes maxResolveOutput, long before
// resolveHostTimeout, and resolveHost returns "" having kept at most that
// much.
func TestResolveHostOutputBounded(t *testing.T) {
	ssh := filepath.Join(t.TempDir(), "ssh")
	if err := os.WriteFile(ssh, []byte("#!/bin/sh\necho hostname 127.0.0.9\nexec cat /dev/zero\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := NewSSHSpawner(SSHConfig{SSHPath: ssh}).(*sshSpawner)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	got := sp.resolveHost(t.Context(), "some-alias")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if got != "" {
		t.Errorf("resolveHost = %q, want \"\" from an ssh that never stops printing", got)
	}
	if took >= resolveHostTimeout {
		t.Errorf("resolveHost took %s: it ran into its timeout instead of stopping at the output limit", took)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("resolveHost allocated %d MiB", alloc>>20)
	}
}

// TestProbeReason: the gist of each tool's message is the system's words.
func TestProbeReason(t *testing.T) {
	for stderr, want := range map[string]string{
		"bash: connect: No route to host\nbash: line 1: /dev/tcp/10.0.0.1/80: No route to host":      "No route to host",
		"nc: connect to 10.0.0.1 port 80 (tcp) failed: Connection refused":                           "Connection refused",
		"Traceback (most recent call last):\nConnectionRefusedError: [Errno 111] Connection refused": "[Errno 111] Connection refused",
		"odd": "odd",
		"":    "exit status 1",
	} {
		if got := probeReason(stderr, errors.New("exit status 1")); got != want {
			t.Errorf("probeReason(%q) = %q, want %q", stderr, got, want)
		}
	}
}

// TestResolveHost: ssh -G tells the address behind a host alias.
func TestResolveHost(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed")
	}
	sp := NewSSHSpawner(SSHConfig{ExtraArgs: []string{"-o", "HostName=127.0.0.9"}}).(*sshSpawner)
	if got := sp.resolveHost(t.Context(), "some-alias"); got != "127.0.0.9" {
		t.Errorf("resolveHost = %q, want 127.0.0.9", got)
	}
	sp = NewSSHSpawner(SSHConfig{SSHPath: "/nonexistent/ssh"}).(*sshSpawner)
	if got := sp.resolveHost(t.Context(), "some-alias"); got != "" {
		t.Errorf("resolveHost without ssh = %q, want \"\"", got)
	}
}

// TestLaunchChoosesAddressOverSSH launches over a real sshd with neither
// BindAddr nor NetworkInterface: the host on 127.0.0.2 is this machine, so
// the route lookup keeps loopback, the preflight probe connects back, and
// every rank gets the service's address.
func TestLaunchChoosesAddressOverSSH(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	remote := NewSSHSpawner(SSHConfig{Port: srv.Port, IdentityFile: srv.IdentityFile, ExtraArgs: srv.ExtraArgs()})
	var out testutil.SyncBuffer
	cfg := DefaultConfig()
	cfg.Hosts = []Host{{Name: "127.0.0.2", Slots: 1}, {Name: "localhost", Slots: 1}}
	cfg.NP = 2
	cfg.Command = []string{"/bin/sh", "-c", `echo "rdv=$` + jobenv.EnvRendezvousAddr + `"`}
	cfg.Stdout, cfg.Stderr = &out, &out
	cfg.SpawnerFor = func(h string) Spawner {
		if IsLocalHost(h) {
			return LocalSpawner{}
		}
		return remote
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := Launch(ctx, cfg); err != nil {
		t.Fatalf("Launch: %v\noutput:\n%s\nsshd log:\n%s", err, out.String(), srv.Log())
	}
	for _, rank := range []string{"[0]", "[1]"} {
		if !strings.Contains(out.String(), rank+"<stdout>: rdv=127.0.0.1:") {
			t.Errorf("rank %s did not get the loopback rendezvous:\n%s", rank, out.String())
		}
	}
}
