package hvd_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/runner"
)

// job builds n runtimes of one job over an in-memory network; they are
// shut down when the test ends.
func job(t *testing.T, n int) []*hvd.Runtime {
	t.Helper()
	ts := memtransport.NewNetwork(n).Transports()
	rts := make([]*hvd.Runtime, n)
	for r := range n {
		env := runner.DefaultWorkerEnv()
		env.Rank, env.Size, env.LocalRank, env.LocalSize = r, n, r, n
		rt, err := hvd.NewRuntime(context.Background(), hvd.Config{Env: env, Transport: ts[r]})
		if err != nil {
			t.Fatal(err)
		}
		rts[r] = rt
	}
	t.Cleanup(func() {
		for _, rt := range rts {
			rt.Shutdown()
		}
	})
	return rts
}

// onEach runs f for every rank concurrently and fails on the first error.
func onEach(t *testing.T, rts []*hvd.Runtime, f func(r int, rt *hvd.Runtime) error) {
	t.Helper()
	errs := make([]error, len(rts))
	var wg sync.WaitGroup
	for r, rt := range rts {
		wg.Go(func() { errs[r] = f(r, rt) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// near reports whether a and b agree within tol, relative to their size.
func near(a, b, tol float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= tol*max(1, abs(a), abs(b))
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
