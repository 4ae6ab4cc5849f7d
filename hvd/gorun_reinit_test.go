package hvd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner"
)

// reinitRankVar, set, makes TestReinitRankProcess run as a rank of the
// job that TestReinitUnderGorun launches with this test binary.
const reinitRankVar = "HVD_TEST_REINIT_RANK"

// TestReinitUnderGorun launches a real job of two ranks with gorun's
// launcher (runner.Launch, local spawner, --log-level debug); each rank is
// this test binary running TestReinitRankProcess: Init, all-reduce,
// Shutdown, then Init and all-reduce again, with GOROVOD_SECRET gone from
// its environment and its debug records shown.
func TestReinitUnderGorun(t *testing.T) {
	if os.Getenv(reinitRankVar) != "" {
		t.Skip("running as a rank of the job")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out testutil.SyncBuffer
	cfg := runner.DefaultConfig()
	cfg.NP = 2
	cfg.Command = []string{exe, "-test.run=^TestReinitRankProcess$", "-test.count=1"}
	cfg.ForwardEnv = []string{reinitRankVar + "=1"}
	cfg.LogLevel = "debug"
	cfg.StartTimeout = 30 * time.Second
	cfg.Stdout, cfg.Stderr = &out, &out
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := runner.Launch(ctx, cfg); err != nil {
		t.Fatalf("Launch: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	for r := range cfg.NP {
		for round := 1; round <= 2; round++ {
			if want := fmt.Sprintf("[%d]<stdout>: reinit ok: rank %d round %d", r, r, round); !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
	}
	if n := strings.Count(text, `DEBUG hvd: joined the job rank=0 launcher=gorun`); n != 2 {
		t.Errorf("rank 0 logged its debug record of the launcher %d times, want 2 (--log-level debug):\n%s", n, text)
	}
}

// TestReinitRankProcess is one rank of TestReinitUnderGorun's job.
func TestReinitRankProcess(t *testing.T) {
	if os.Getenv(reinitRankVar) == "" {
		t.Skip("run by TestReinitUnderGorun as a rank of its job")
	}
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		if err := hvd.Init(ctx); err != nil {
			t.Fatalf("Init of round %d: %v", round, err)
		}
		if _, ok := os.LookupEnv(jobenv.EnvSecret); ok {
			t.Errorf("round %d: %s is still in the environment", round, jobenv.EnvSecret)
		}
		child, err := exec.Command("sh", "-c", `printf %s "${GOROVOD_SECRET-unset}"`).Output()
		if err != nil || string(child) != "unset" {
			t.Errorf("round %d: a child process sees %s (%d characters), %v", round, jobenv.EnvSecret, len(child), err)
		}
		rank := hvd.Rank()
		if err := sumOfRanks(hvd.Default(), round); err != nil {
			hvd.Shutdown()
			t.Fatal(err)
		}
		fmt.Printf("reinit ok: rank %d round %d\n", rank, round)
		if err := hvd.Shutdown(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rank) * 200 * time.Millisecond) // rank 0 comes back first
	}
}
