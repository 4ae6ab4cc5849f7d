package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// TestEngineCacheInvalidation: a cached name whose shape changes on every
// rank is negotiated again; when it changes on one rank only, every rank
// gets the mismatch; the steady state goes back to the cache.
func TestEngineCacheInvalidation(t *testing.T) {
	const n = 3
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	run := func(shape func(r int) int) []error {
		errs := make([]error, n)
		onEngines(t, es, func(r int, e *engine.Engine) error {
			x := make([]float32, shape(r))
			for i := range x {
				x[i] = float32(r + i)
			}
			errs[r] = e.Submit(allreduceReq("x", kernels.F32, kernels.Sum, len(x)), kernels.AsBytes(x)).Wait(context.Background())
			if errs[r] != nil {
				return nil // the mismatch cases; checked below
			}
			for i, v := range x {
				if want := float32(n*(n-1)/2 + n*i); v != want {
					return fmt.Errorf("sum %v, element %d wants %v", x, i, want)
				}
			}
			return nil
		})
		return errs
	}
	for _, shape := range []func(int) int{
		func(int) int { return 4 }, func(int) int { return 4 }, // negotiated, then cached
		func(int) int { return 8 }, func(int) int { return 8 }, // invalidated everywhere, cached again
	} {
		meshtest.MustAll(t, run(shape))
	}
	before := es[0].Stats()
	if before.Cached != 2 || before.Negotiated != 2 {
		t.Fatalf("want 2 cached and 2 negotiated responses: %+v", before)
	}
	for r, err := range run(func(r int) int { return 8 + r/2 }) {
		if !errors.Is(err, engine.ErrMismatch) {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	meshtest.MustAll(t, run(func(int) int { return 8 }))
}

// TestEngineQuiesce: once the named operations are done, Quiesce returns
// and the Comm can be used directly; the engine then works again.
func TestEngineQuiesce(t *testing.T) {
	const n = 3
	es, cs := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for round := range 3 {
			x := []float64{1}
			if err := e.Submit(allreduceReq("x", kernels.F64, kernels.Sum, 1), kernels.AsBytes(x)).Wait(ctx); err != nil {
				return err
			}
			if err := e.Quiesce(ctx); err != nil {
				return err
			}
			y := []float64{2}
			if err := collective.Allreduce(ctx, cs[r], y, kernels.Sum, collective.ReduceOptions{}); err != nil {
				return fmt.Errorf("round %d: direct all-reduce: %w", round, err)
			}
			if x[0] != n || y[0] != 2*n {
				return fmt.Errorf("round %d: %v %v", round, x, y)
			}
		}
		return nil
	})
}

// TestEngineCommFailure: a rank's communicator breaks while the others
// negotiate; their operations fail with the cause, and so does every later
// call.
func TestEngineCommFailure(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			const n = 3
			es, cs := newEngines(t, tr.Make, n, testConfig())
			hs := make([]*engine.Handle, n)
			for r := 1; r < n; r++ {
				hs[r] = es[r].Submit(allreduceReq("g", kernels.F32, kernels.Sum, 1<<16), make([]byte, 4<<16))
			}
			time.Sleep(20 * time.Millisecond)
			cause := errors.New("test: rank 0 lost its GPU")
			cs[0].Abort(cause)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for r := 1; r < n; r++ {
				err := hs[r].Wait(ctx)
				if err == nil || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("rank %d: %v", r, err)
				}
				if later := es[r].Submit(allreduceReq("h", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Err(); later == nil || later.Error() != es[r].Err().Error() {
					t.Fatalf("rank %d: later call: %v, engine: %v", r, later, es[r].Err())
				}
			}
		})
	}
}

// TestEngineSeededFaults: a link breaks at a random message (during the
// negotiation, the gather or the fused all-reduce); every rank's
// operations then fail, or all succeed if the fault came after them, and
// none hangs.
func TestEngineSeededFaults(t *testing.T) {
	const n, tensors = 3, 6
	for seed := range uint64(12) {
		net := memtransport.NewNetwork(n, memtransport.RandomFault(seed, 400))
		es := make([]*engine.Engine, n)
		for r, tr := range net.Transports() {
			c := collective.NewComm(tr, collective.Options{SegmentBytes: 16 << 10})
			defer c.Close()
			es[r] = engine.New(c, testConfig())
			defer es[r].Shutdown()
		}
		failed := make([]bool, n)
		onEngines(t, es, func(r int, e *engine.Engine) error {
			hs := make([]*engine.Handle, tensors)
			for i := range hs {
				hs[i] = e.Submit(allreduceReq(fmt.Sprint("f", i), kernels.F32, kernels.Sum, 32<<10), make([]byte, 128<<10))
			}
			failed[r] = waitAll(hs) != nil
			return nil
		})
		if slices.Contains(failed, true) && slices.Contains(failed, false) {
			// A rank whose last message got through may finish before the
			// link breaks; its next operation must fail, though.
			for r, e := range es {
				if !failed[r] && e.Submit(allreduceReq("next", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(context.Background()) == nil {
					t.Fatalf("seed %d: rank %d goes on after the fault", seed, r)
				}
			}
		}
	}
}
