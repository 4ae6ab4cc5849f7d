package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkScaleCycle measures the negotiation cycle of jobs of 256 and
// 1,024 in-process ranks over the memory transport: in each step every
// rank submits one float32 sum all-reduce of one element (a loss, a
// metric) and waits for it, as a blocking hvd.Allreduce does. With
// cache=off every cycle all-gathers the requests (all-gatherv of every
// rank's serialized request, then validation of the n entries); with
// cache=on the response cache answers from the second step on and the
// tensor rides in the control vector of the next cycle (the early
// all-reduce), so a step is one exchange of the control vector, whose
// length grows as 7 bytes per rank plus the cache's span.
//
// Besides ns/op (per step) it reports, from rank 0, ns/cycle (the step's
// time divided by the cycles that ran in it), negotiation-ns/cycle (time
// in the negotiation collectives, waiting for the slowest rank included),
// cycles/step, gathers/step and early/step. Every rank is a goroutine, so
// on few CPUs a cycle costs the CPU work of all n ranks.
//
//	go test ./collective/engine -run '^$' -bench ScaleCycle -benchtime 20x
func BenchmarkScaleCycle(b *testing.B) {
	for _, n := range []int{256, 1024} {
		for _, cache := range []int{0, engine.DefaultConfig().CacheCapacity} {
			name := fmt.Sprintf("n=%d/cache=%s", n, map[bool]string{true: "on", false: "off"}[cache > 0])
			b.Run(name, func(b *testing.B) { benchScaleCycle(b, n, cache) })
		}
	}
}

func benchScaleCycle(b *testing.B, n, cache int) {
	cfg := engine.DefaultConfig()
	cfg.CycleTime = time.Microsecond // cycles back to back: nothing waits for a timer
	cfg.CacheCapacity = cache
	cfg.Logger = slog.New(slog.DiscardHandler)
	es, cs := scaleEngines(n, cfg)
	defer shutdownAll(es, cs)
	steps := make([]func() error, n)
	for r, e := range es {
		steps[r] = scaleStep(e)
	}
	runSteps(b, steps, 5) // the cache, the plans, the buffers
	before := es[0].Stats()
	b.ResetTimer()
	runSteps(b, steps, b.N)
	b.StopTimer()
	after := es[0].Stats()
	if cycles := after.Cycles - before.Cycles; cycles > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(cycles), "ns/cycle")
	}
	reportEngine(b, before, after)
}

// scaleEngines starts an engine over a default Comm on each rank of a
// memory mesh of n ranks.
func scaleEngines(n int, cfg engine.Config) ([]*engine.Engine, []*collective.Comm) {
	es, cs := make([]*engine.Engine, n), make([]*collective.Comm, n)
	for r, t := range memtransport.NewNetwork(n).Transports() {
		cs[r] = collective.NewComm(t, collective.Options{})
		es[r] = engine.New(cs[r], cfg)
	}
	return es, cs
}

// shutdownAll shuts the engines down at once (one by one, each could wait
// out the grace period for peers already gone), then closes their Comms.
func shutdownAll(es []*engine.Engine, cs []*collective.Comm) {
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Go(e.Shutdown)
	}
	wg.Wait()
	for _, c := range cs {
		c.Close()
	}
}

// scaleStep returns one step of a rank: a blocking all-reduce of one
// float32, submitted to be driven by the caller.
func scaleStep(e *engine.Engine) func() error {
	req := allreduceReq("scale/loss", kernels.F32, kernels.Sum, 1)
	buf := make([]byte, 4)
	return func() error {
		if err := e.SubmitDriven(req, buf).Wait(context.Background()); err != nil {
			return fmt.Errorf("%s: %w", req.Name, err)
		}
		return nil
	}
}
