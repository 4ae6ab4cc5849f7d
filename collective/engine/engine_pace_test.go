package engine_test

import (
	"context"
	"errors"
	"fmt"
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

// TestEngineDrivenByCaller: blocking operations submitted with
// SubmitDriven and waited for without a deadline are negotiated and run
// by the waiting callers on every rank. The engine's goroutine, with an
// hour's cycle time, is woken once, after the first cycle made the engine
// active, to take up the pacing; if it is slow to get a processor it may
// find the next submission and run that one cycle itself, never more.
func TestEngineDrivenByCaller(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 3, hourCycles())
	const steps = 20
	// The first step may meet an engine goroutine that has just started
	// and looks at the queue on its own; count from the second.
	onEngines(t, es, func(r int, e *engine.Engine) error {
		return e.SubmitDriven(allreduceReq("m", kernels.F32, kernels.Sum, 4), make([]byte, 16)).Wait(context.Background())
	})
	before := make([]engine.Stats, len(es))
	for r, e := range es {
		before[r] = e.Stats()
	}
	onEngines(t, es, func(r int, e *engine.Engine) error {
		for i := range steps {
			h := e.SubmitDriven(allreduceReq("m", kernels.F32, kernels.Sum, 4), make([]byte, 16))
			if err := h.Wait(context.Background()); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
		return nil
	})
	for r, e := range es {
		st := e.Stats()
		cycles, driven := st.Cycles-before[r].Cycles, st.Driven-before[r].Driven
		if cycles < steps || driven+1 < cycles {
			t.Errorf("rank %d: %d cycles, %d of them driven by callers; want at least %d, all but one at most driven", r, cycles, driven, steps)
		}
	}
}

// TestEngineDrivenShutdown: a caller driving a cycle that waits for a rank
// which never submits does not keep Shutdown waiting past its grace: the
// cycle is cancelled, the operation fails, and the caller returns.
func TestEngineDrivenShutdown(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 2, hourCycles())
	h := es[0].SubmitDriven(allreduceReq("lonely", kernels.F32, kernels.Sum, 4), make([]byte, 16))
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // the caller is in the cycle by now, or will be
	done := make(chan struct{})
	go func() { es[0].Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown still waits for the driven cycle")
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("the operation that no peer submitted succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the driving caller did not return after Shutdown")
	}
}

// TestEngineDrivenConcurrently: several goroutines per rank wait for
// their own blocking operations at once while another submits
// asynchronously and waits with a deadline; whichever goroutine runs the
// cycles, every operation completes with the right sum on every rank.
func TestEngineDrivenConcurrently(t *testing.T) {
	const n, workers, steps = 3, 4, 30
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		errs := make(chan error, workers+1)
		for w := range workers + 1 {
			go func() {
				for s := range steps {
					name := fmt.Sprintf("w%d", w)
					buf := kernels.AsBytes([]float32{float32(r + 1), float32(s)})
					var err error
					if w == workers { // asynchronous, waited for with a deadline
						h := e.Submit(allreduceReq(name, kernels.F32, kernels.Sum, 2), buf)
						err = waitAll([]*engine.Handle{h})
					} else {
						err = e.SubmitDriven(allreduceReq(name, kernels.F32, kernels.Sum, 2), buf).Wait(context.Background())
					}
					if err != nil {
						errs <- fmt.Errorf("worker %d step %d: %w", w, s, err)
						return
					}
					if got := kernels.FromBytes[float32](buf); got[0] != n*(n+1)/2 || got[1] != float32(n*s) {
						errs <- fmt.Errorf("worker %d step %d: got %v", w, s, got)
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers + 1 {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	})
}

// TestEngineDrivenPeerFails: a caller driving a cycle when its peer's
// communicator closes gets the failure, not a hang, and later submissions
// fail at once.
func TestEngineDrivenPeerFails(t *testing.T) {
	es, cs := newEngines(t, meshtest.Mem, 2, hourCycles())
	h := es[0].SubmitDriven(allreduceReq("x", kernels.F32, kernels.Sum, 1), make([]byte, 4))
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	cs[1].Close()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("the operation succeeded without its peer")
		}
		t.Logf("rank 0: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the driving caller still waits 30 s after its peer closed")
	}
	later := es[0].SubmitDriven(allreduceReq("later", kernels.F32, kernels.Sum, 1), make([]byte, 4))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := later.Wait(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a submission after the failure: %v, want the engine's failure", err)
	}
}

// TestEngineSleepsWhileDriven: while callers run the cycles themselves,
// blocking operation after operation, the engine's goroutine does not wake
// every cycle time to find nothing due: a caller that moves the next
// cycle later moves the goroutine's timer with it. Without that, the
// goroutine woke about once a cycle time (20 here) over the steps.
func TestEngineSleepsWhileDriven(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.CycleTime = 20 * time.Millisecond
	es, _ := newEngines(t, meshtest.Mem, 2, cfg)
	step := func(r int, e *engine.Engine) error {
		return e.SubmitDriven(allreduceReq("m", kernels.F32, kernels.Sum, 4), make([]byte, 16)).Wait(context.Background())
	}
	onEngines(t, es, step) // the engine turns active; its goroutine takes up the pacing
	before := make([]engine.Stats, len(es))
	for r, e := range es {
		before[r] = e.Stats()
	}
	start := time.Now()
	var steps int
	for time.Since(start) < 20*cfg.CycleTime {
		onEngines(t, es, step)
		steps++
	}
	elapsed := time.Since(start)
	for r, e := range es {
		st := e.Stats()
		wakes, cycles := st.Wakes-before[r].Wakes, st.Cycles-before[r].Cycles
		// A caller that loses a processor for longer than a cycle time
		// lets the timer ring once: a loaded machine may see a few.
		t.Logf("rank %d: %d wakes, %d steps in %v", r, wakes, steps, elapsed)
		if limit := uint64(elapsed / cfg.CycleTime / 4); wakes > limit {
			t.Errorf("rank %d: the engine's goroutine woke %d times in %v (%d steps, %d cycles, cycle time %v); want at most %d",
				r, wakes, elapsed, steps, cycles, cfg.CycleTime, limit)
		}
		if cycles < uint64(steps) {
			t.Errorf("rank %d: %d cycles for %d steps", r, cycles, steps)
		}
	}
}
