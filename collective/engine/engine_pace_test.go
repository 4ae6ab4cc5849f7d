package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// hourCycles is a configuration whose cycle time no test waits out: an
// operation that completes under it was negotiated without waiting for a
// cycle time to pass.
func hourCycles() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.CycleTime = time.Hour
	return cfg
}

// submitAt submits one float32 all-reduce of 4 elements named name.
func submitAt(e *engine.Engine, name string) *engine.Handle {
	return e.Submit(allreduceReq(name, kernels.F32, kernels.Sum, 4), make([]byte, 16))
}

// TestEngineNegotiatesAtOnce: the first submission after an idle spell,
// and one that arrives after a cycle has begun elsewhere, are negotiated
// at once rather than a cycle time later; ranks that submit the same
// names in different orders, with pauses between, still finish.
func TestEngineNegotiatesAtOnce(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 3, hourCycles())
	for range 3 { // each step starts from idle, or from a pending idle check
		onEngines(t, es, func(r int, e *engine.Engine) error {
			return waitAll([]*engine.Handle{submitAt(e, "solo")})
		})
	}
	// Rank 2 submits "b" well after the others have negotiated "a" and
	// are waiting in the next cycle for it.
	onEngines(t, es, func(r int, e *engine.Engine) error {
		ha := submitAt(e, "a")
		if r == 2 {
			if err := waitAll([]*engine.Handle{ha}); err != nil {
				return err
			}
			time.Sleep(30 * time.Millisecond)
			return waitAll([]*engine.Handle{submitAt(e, "b")})
		}
		return waitAll([]*engine.Handle{ha, submitAt(e, "b")})
	})
	// Opposite orders, with a pause between the two submissions.
	onEngines(t, es, func(r int, e *engine.Engine) error {
		first, second := "x", "y"
		if r == 1 {
			first, second = second, first
		}
		h1 := submitAt(e, first)
		time.Sleep(20 * time.Millisecond)
		return waitAll([]*engine.Handle{h1, submitAt(e, second)})
	})
}

// TestEngineDoesNotSpin: ranks that each wait for a name the other never
// submits negotiate about once per cycle time, not back to back.
func TestEngineDoesNotSpin(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.CycleTime = 40 * time.Millisecond
	es, _ := newEngines(t, meshtest.Mem, 2, cfg)
	h0, h1 := submitAt(es[0], "only-on-0"), submitAt(es[1], "only-on-1")
	start := time.Now()
	time.Sleep(400 * time.Millisecond)
	cycles, elapsed := es[0].Stats().Cycles, time.Since(start)
	// One cycle for the submissions, one retry at once, then one per
	// cycle time (a late timer only lowers the count).
	if limit := 3 + uint64(elapsed/cfg.CycleTime); cycles > limit {
		t.Errorf("%d cycles in %v with a %v cycle time: want at most %d", cycles, elapsed, cfg.CycleTime, limit)
	}
	if cycles < 2 {
		t.Errorf("%d cycles in %v: the ranks stopped negotiating", cycles, elapsed)
	}
	for _, e := range es {
		e.Shutdown()
	}
	for _, h := range []*engine.Handle{h0, h1} {
		if err := h.Wait(context.Background()); !errors.Is(err, engine.ErrShutdown) {
			t.Errorf("%s after Shutdown: %v, want ErrShutdown", h.Name(), err)
		}
	}
}
