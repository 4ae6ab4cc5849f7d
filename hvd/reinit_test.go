package hvd_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

// sumOfRanks all-reduces rank+1 (and the round) on rt and checks the sum.
func sumOfRanks(rt *hvd.Runtime, round int) error {
	x := hvd.NewTensor(fmt.Sprintf("round%d", round), []float32{float32(rt.Rank() + 1), float32(round)})
	if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return fmt.Errorf("round %d: %w", round, err)
	}
	n := float32(rt.Size())
	if v := hvd.Values[float32](x); v[0] != n*(n+1)/2 || v[1] != n*float32(round) {
		return fmt.Errorf("round %d: sum %v, want [%v %v]", round, v, n*(n+1)/2, n*float32(round))
	}
	return nil
}

// reinitRanks runs every rank's rounds concurrently: in each round the
// rank waits stagger(rank, round), builds a runtime with start, all-reduces
// when collect says so, and shuts it down. It fails on any rank's error.
func reinitRanks(t *testing.T, n, rounds int, start func(r int) (*hvd.Runtime, error),
	stagger func(r, round int) time.Duration, collect func(r, round int) bool) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for round := 1; round <= rounds; round++ {
				time.Sleep(stagger(r, round))
				rt, err := start(r)
				if err != nil {
					errs[r] = fmt.Errorf("Init of round %d: %w", round, err)
					return
				}
				if collect(r, round) {
					err = sumOfRanks(rt, round)
				}
				if serr := rt.Shutdown(); err == nil && serr != nil {
					err = serr
				}
				if err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestReinitUnderLauncherRendezvous: every rank of a gorun-style job (one
// rendezvous for the whole job) shuts its runtime down and builds a new
// one, three times, and each round forms a new mesh (Horovod's
// test_horovod_reinit). Ranks come back at different times: the first
// back must wait for the others' new addresses, not read the old table.
func TestReinitUnderLauncherRendezvous(t *testing.T) {
	const n, rounds = 3, 3
	secret, addr := rendezvousJob(t, n)
	start := func(r int) (*hvd.Runtime, error) {
		cfg := hvdtest.Config(r, n)
		cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = addr, secret, 20*time.Second
		cfg.Plan = jobenv.JoinPlan{Launcher: jobenv.LauncherGorun}
		return hvd.NewRuntime(context.Background(), cfg)
	}
	stagger := func(r, round int) time.Duration { // round 2: rank 0 first; round 3: rank 2 first
		if round == 2 {
			return time.Duration(r) * 150 * time.Millisecond
		}
		return time.Duration(n-1-r) * 150 * time.Millisecond * time.Duration(round-1)
	}
	reinitRanks(t, n, rounds, start, stagger, func(int, int) bool { return true })
}

// TestReinitShutdownWithoutCollectives: ranks that shut down at once after
// Init and come back straight away still meet in the next round.
func TestReinitShutdownWithoutCollectives(t *testing.T) {
	const n, rounds = 3, 3
	secret, addr := rendezvousJob(t, n)
	start := func(r int) (*hvd.Runtime, error) {
		cfg := hvdtest.Config(r, n)
		cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = addr, secret, 20*time.Second
		return hvd.NewRuntime(context.Background(), cfg)
	}
	reinitRanks(t, n, rounds, start, func(int, int) time.Duration { return 0 },
		func(_, round int) bool { return round == rounds })
}

// TestReinitLauncherHosted: in a job that gorun did not start (torchrun
// style), rank 0 serves the rendezvous until its mesh forms; after every
// rank shut down, rank 0's next runtime serves a new one on the same port
// and the ranks meet again. Ranks other than 0 come back at once, so some
// may reach rank 0's old rendezvous before it closes, and must be sent on
// to the new one.
func TestReinitLauncherHosted(t *testing.T) {
	const n, rounds = 3, 3
	port := freePort(t)
	start := func(r int) (*hvd.Runtime, error) {
		cfg, err := hvd.ConfigFromEnv(torchrunEnv(r, n, port))
		if err != nil {
			return nil, err
		}
		cfg.StartTimeout = 20 * time.Second
		return hvd.NewRuntime(context.Background(), cfg)
	}
	stagger := func(r, round int) time.Duration {
		if r == 0 && round > 1 {
			return 100 * time.Millisecond
		}
		return 0
	}
	reinitRanks(t, n, rounds, start, stagger, func(r, round int) bool { return round != 2 })
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("the rendezvous port is still held after the last round: %v", err)
	}
	ln.Close()
}
