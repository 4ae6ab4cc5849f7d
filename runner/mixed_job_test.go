package runner

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/runner/internal/testsshd"
)

// TestMixedLocalAndSSHJob runs one real job over both spawners: ranks 0-1
// on 127.0.0.2 through a real sshd, ranks 2-3 on localhost. The ranks are
// examples/hello, which calls hvd.Init (rendezvous, authenticated TCP
// mesh) and all-reduces rank+1, so the job only succeeds if every rank
// found every other one and the sum is 10.
func TestMixedLocalAndSSHJob(t *testing.T) {
	srv := testsshd.Start(t)
	bin := filepath.Join(t.TempDir(), "hello")
	build := exec.Command("go", "build", "-o", bin, "../examples/hello")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hello: %v\n%s", err, out)
	}
	hosts, err := ParseHosts("127.0.0.2:2,localhost:2")
	if err != nil {
		t.Fatal(err)
	}
	remote := NewSSHSpawner(SSHConfig{Port: srv.Port, IdentityFile: srv.IdentityFile, ExtraArgs: srv.ExtraArgs()})
	var out testutil.SyncBuffer
	cfg := DefaultConfig()
	cfg.NP, cfg.Hosts, cfg.Command = 4, hosts, []string{bin}
	cfg.BindAddr = "127.0.0.1"
	cfg.StartTimeout = 30 * time.Second
	cfg.Stdout, cfg.Stderr = &out, &out
	cfg.SpawnerFor = func(h string) Spawner {
		if IsLocalHost(h) {
			return LocalSpawner{}
		}
		return remote
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Launch(ctx, cfg); err != nil {
		t.Fatalf("Launch: %v\noutput:\n%s\nsshd log:\n%s", err, out.String(), srv.Log())
	}
	if !strings.Contains(out.String(), "[0]<stdout>: size=4 sum=10") {
		t.Fatalf("rank 0 did not report the all-reduce:\n%s", out.String())
	}
}
