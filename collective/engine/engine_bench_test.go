package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkEngineStep measures one training step of 4 MiB of float32
// gradients on 4 in-process ranks over loopback TCP:
//
//	comm-4MiB           Comm.Allreduce of one 4 MiB buffer (no engine)
//	single-4MiB         one 4 MiB tensor through the engine
//	256x16KiB/cache=on  256 tensors of 16 KiB submitted asynchronously,
//	256x16KiB/cache=off negotiated and fused by the engine
//
// Besides ns/op (per step) it reports, from rank 0, the cycles, all-reduce
// batches and request gathers per step, and negotiation-ns/cycle: the time
// from a cycle's start to its decision, which here includes waiting for
// the slowest rank (BenchmarkEngineNegotiation isolates the cost itself).
//
//	go test ./collective -run '^$' -bench EngineStep -benchtime 100x
func BenchmarkEngineStep(b *testing.B) {
	const ranks, total = 4, 4 << 20
	for _, c := range []struct {
		name    string
		tensors int
		engine  bool
		cache   int
	}{
		{"comm-4MiB", 1, false, 0},
		{"single-4MiB", 1, true, 1024},
		{"256x16KiB/cache=on", 256, true, 1024},
		{"256x16KiB/cache=off", 256, true, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := engine.DefaultConfig()
			cfg.CacheCapacity = c.cache
			benchEngineSteps(b, ranks, total, c.tensors, c.engine, cfg, 3)
		})
	}
}

// benchEngineSteps times steps of total bytes of float32 on ranks
// in-process ranks: one bare Comm.Allreduce of all of it (viaEngine false),
// or tensors all-reduces through engines configured by cfg, after warm
// warm-up steps; it reports the engine's statistics per step.
func benchEngineSteps(b *testing.B, ranks, total, tensors int, viaEngine bool, cfg engine.Config, warm int) {
	cs := benchComms(b, ranks)
	steps := make([]func() error, ranks)
	var es []*engine.Engine
	for r, comm := range cs {
		if !viaEngine {
			buf := make([]float32, total/4)
			steps[r] = func() error {
				return collective.Allreduce(context.Background(), comm, buf, kernels.Sum, collective.ReduceOptions{})
			}
			continue
		}
		e := engine.New(comm, cfg)
		es = append(es, e)
		steps[r] = engineStep(e, tensors, total/tensors)
	}
	defer func() {
		for _, e := range es {
			e.Shutdown()
		}
	}()
	runSteps(b, steps, warm) // plans, buffers, the cache
	var before engine.Stats
	if es != nil {
		before = es[0].Stats()
	}
	b.SetBytes(int64(total))
	b.ResetTimer()
	runSteps(b, steps, b.N)
	b.StopTimer()
	if es != nil {
		reportEngine(b, before, es[0].Stats())
	}
}

// engineStep returns a step that submits n all-reduces of size bytes each
// and waits for all of them, as hvd does: the tensors of a step submitted
// as they come (Submit) and waited for with a context that cannot end
// (which drives the engine, see Handle.Wait); a single tensor as a
// blocking hvd.Allreduce submits it (SubmitDriven).
func engineStep(e *engine.Engine, n, size int) func() error {
	bufs := make([][]byte, n)
	reqs := make([]engine.Request, n)
	for i := range n {
		bufs[i] = make([]byte, size)
		reqs[i] = allreduceReq(fmt.Sprintf("layer%03d/grad", i), kernels.F32, kernels.Sum, size/4)
	}
	hs := make([]*engine.Handle, n)
	return func() error {
		submit := e.Submit
		if n == 1 {
			submit = e.SubmitDriven
		}
		for i := range n {
			hs[i] = submit(reqs[i], bufs[i])
		}
		for _, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				return fmt.Errorf("%s: %w", h.Name(), err)
			}
		}
		return nil
	}
}

// runSteps runs every rank's step n times, all ranks at once.
func runSteps(b *testing.B, steps []func() error, n int) {
	var wg sync.WaitGroup
	for _, step := range steps {
		wg.Go(func() {
			for range n {
				if err := step(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkEngineNegotiation measures the steady-state cost of one
// negotiation cycle on 4 ranks over loopback TCP: "cached" runs steps of
// one 4-byte all-reduce from the response cache with a 1 µs cycle time
// (so cycles run back to back; ns/op covers about two cycles, see
// cycles/step), "uncached" the same without the cache, and
// "control-vector" is the bare Min all-reduce of the control vector a
// cycle with 256 cached tensors sends.
//
//	go test ./collective -run '^$' -bench EngineNegotiation -benchtime 2000x
func BenchmarkEngineNegotiation(b *testing.B) {
	const ranks = 4
	b.Run("control-vector", func(b *testing.B) {
		cs := benchComms(b, ranks)
		steps := make([]func() error, ranks)
		for r, c := range cs {
			vec := make([]byte, 4+7*ranks+256)
			steps[r] = func() error {
				return c.Allreduce(context.Background(), kernels.U8, vec, kernels.Min, collective.ReduceOptions{})
			}
		}
		runSteps(b, steps, 10)
		b.ResetTimer()
		runSteps(b, steps, b.N)
	})
	for _, cache := range []int{1024, 0} {
		b.Run(map[bool]string{true: "cached", false: "uncached"}[cache > 0], func(b *testing.B) {
			cs := benchComms(b, ranks)
			cfg := engine.DefaultConfig()
			cfg.CycleTime, cfg.CacheCapacity = time.Microsecond, cache
			steps := make([]func() error, ranks)
			es := make([]*engine.Engine, ranks)
			for r, c := range cs {
				es[r] = engine.New(c, cfg)
				defer es[r].Shutdown()
				steps[r] = engineStep(es[r], 1, 4)
			}
			runSteps(b, steps, 10)
			before := es[0].Stats()
			b.ResetTimer()
			runSteps(b, steps, b.N)
			b.StopTimer()
			reportEngine(b, before, es[0].Stats())
		})
	}
}

func reportEngine(b *testing.B, before, after engine.Stats) {
	cycles := after.Cycles - before.Cycles
	if cycles == 0 {
		return
	}
	n := float64(b.N)
	b.ReportMetric(float64((after.Negotiation-before.Negotiation).Nanoseconds())/float64(cycles), "negotiation-ns/cycle")
	b.ReportMetric(float64(cycles)/n, "cycles/step")
	b.ReportMetric(float64(after.Batches-before.Batches)/n, "batches/step")
	b.ReportMetric(float64(after.Gathers-before.Gathers)/n, "gathers/step")
	b.ReportMetric(float64(after.Early-before.Early)/n, "early/step")
}

func benchComms(b *testing.B, n int) []*collective.Comm {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts, err := tcptransport.LocalMesh(ctx, n, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		b.Fatal(err)
	}
	cs := make([]*collective.Comm, n)
	for r, t := range ts {
		cs[r] = collective.NewComm(t, collective.Options{})
	}
	b.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// BenchmarkEngineSmall measures what the engine adds to one small
// all-reduce that every rank submits alone, with the default cycle time,
// at a time on 2 in-process ranks over loopback TCP: "comm-4KiB" is the
// bare Comm.Allreduce, "engine-4KiB" the same buffer through the engine
// (one tensor per step, as a training step with a single gradient or a
// metric does; the response cache answers from the second step on).
//
//	go test ./collective/engine -run '^$' -bench EngineSmall
func BenchmarkEngineSmall(b *testing.B) {
	const ranks, size = 2, 4 << 10
	for _, viaEngine := range []bool{false, true} {
		b.Run(map[bool]string{false: "comm-4KiB", true: "engine-4KiB"}[viaEngine], func(b *testing.B) {
			benchEngineSteps(b, ranks, size, 1, viaEngine, engine.DefaultConfig(), 10)
		})
	}
}
