package hvd_test

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
)

// checkSecretGone fails unless no variable of this process, nor of a
// process it starts now, holds the secret (hex) or is GOROVOD_SECRET.
func checkSecretGone(t *testing.T, secretHex string) {
	t.Helper()
	if v, ok := os.LookupEnv(jobenv.EnvSecret); ok {
		t.Fatalf("%s is still in the environment (%d characters)", jobenv.EnvSecret, len(v))
	}
	for _, kv := range os.Environ() {
		if strings.Contains(strings.ToLower(kv), secretHex) {
			name, _, _ := strings.Cut(kv, "=")
			t.Fatalf("%s holds the secret", name)
		}
	}
	out, err := exec.Command("sh", "-c", `printf '%s\n' "${GOROVOD_SECRET-unset}"; env`).Output()
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	if first != "unset" || strings.Contains(strings.ToLower(rest), secretHex) {
		t.Fatalf("a child process sees the secret: %s=%d characters", jobenv.EnvSecret, len(first))
	}
}

// peerResult is what building a peer runtime in the background gave.
type peerResult struct {
	rt  *hvd.Runtime
	err error
}

// startPeer builds a peer runtime in the background with start.
func startPeer(start func() (*hvd.Runtime, error)) <-chan peerResult {
	ch := make(chan peerResult, 1)
	go func() {
		rt, err := start()
		ch <- peerResult{rt, err}
	}()
	return ch
}

// initWithPeer runs two rounds of a job of two ranks: this process's
// package-level runtime (rank 0, from the environment) and a peer runtime
// from start. Every round all-reduces and shuts both down; check runs
// after each Init.
func initWithPeer(t *testing.T, start func() (*hvd.Runtime, error), check func(round int)) {
	t.Helper()
	for round := 1; round <= 2; round++ {
		peerRound(t, round, start, check)
	}
}

// peerRound is one round of initWithPeer; both runtimes are shut down
// however it ends.
func peerRound(t *testing.T, round int, start func() (*hvd.Runtime, error), check func(round int)) {
	t.Helper()
	peer := startPeer(start)
	err := hvd.Init(context.Background())
	defer hvd.Shutdown()
	p := <-peer
	if p.rt != nil {
		defer p.rt.Shutdown()
	}
	if err != nil || p.err != nil {
		t.Fatalf("round %d: Init: %v; peer: %v", round, err, p.err)
	}
	errc := make(chan error, 1)
	go func() { errc <- sumOfRanks(p.rt, round) }()
	err = sumOfRanks(hvd.Default(), round)
	if perr := <-errc; err == nil {
		err = perr
	}
	if err != nil {
		t.Fatal(err)
	}
	check(round)
}

// TestInitTakesSecretOutOfEnvironment: under gorun's contract, Init
// removes GOROVOD_SECRET from the environment, so a process the program
// starts does not inherit it, and Init after Shutdown still joins the
// job with the secret it took.
func TestInitTakesSecretOutOfEnvironment(t *testing.T) {
	const n = 2
	secret, addr := rendezvousJob(t, n)
	secretHex := hex.EncodeToString(secret)
	env := jobenv.DefaultEnv()
	env.Size, env.LocalSize, env.Hostname = n, n, "localhost"
	env.RendezvousAddr, env.Secret, env.StartTimeout = addr, secret, 20*time.Second
	for _, kv := range env.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	start := func() (*hvd.Runtime, error) {
		cfg := hvdtest.Config(1, n)
		cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = addr, secret, 20*time.Second
		return hvd.NewRuntime(context.Background(), cfg)
	}
	initWithPeer(t, start, func(round int) {
		checkSecretGone(t, secretHex)
		if hvd.Launcher() != jobenv.LauncherGorun || hvd.Size() != n {
			t.Errorf("round %d: launcher %q size %d", round, hvd.Launcher(), hvd.Size())
		}
	})
}

// TestInitSecretFileStaysOutOfEnvironment: a job started by another
// launcher (torchrun style) reads its secret from GOROVOD_SECRET_FILE,
// whose content never enters the environment; rank 0 serves the
// rendezvous, and its Init after Shutdown serves a new one on the same
// port.
func TestInitSecretFileStaysOutOfEnvironment(t *testing.T) {
	const n = 2
	secretHex := strings.Repeat("5a", 32)
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secretHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	fileVar := jobenv.EnvSecretFile + "=" + path
	for name, value := range map[string]string{
		"RANK": "0", "WORLD_SIZE": strconv.Itoa(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port),
		jobenv.EnvSecretFile: path, jobenv.EnvRank: "", jobenv.EnvStartTimeout: "20s",
	} {
		t.Setenv(name, value)
	}
	start := func() (*hvd.Runtime, error) {
		cfg, err := hvd.ConfigFromEnv(torchrunEnv(1, n, port, fileVar, jobenv.EnvStartTimeout+"=20s"))
		if err != nil {
			return nil, err
		}
		return hvd.NewRuntime(context.Background(), cfg)
	}
	initWithPeer(t, start, func(round int) {
		checkSecretGone(t, secretHex)
		if hvd.Launcher() != jobenv.LauncherTorchrun {
			t.Errorf("round %d: launcher %q", round, hvd.Launcher())
		}
	})
}
