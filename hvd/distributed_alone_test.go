package hvd_test

import (
	"context"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// TestDistributedAloneSkipsTheEngine: in a job of one rank the averaged
// gradient is the gradient itself, so uncompressed gradients stay in Grad
// and the step runs no all-reduce, with the update the wrapped optimizer
// makes alone, bit for bit; compressed ones still go through the engine
// and are rounded as on many ranks.
func TestDistributedAloneSkipsTheEngine(t *testing.T) {
	ctx := context.Background()
	grads := []float64{0.1, -1.0 / 3, 1e-300, 7}
	run := func(rt *hvd.Runtime, comp hvd.Compression, distributed bool) []float64 {
		p := hvd.NewParam("w", len(grads))
		sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 0.3, Momentum: 0.9, WeightDecay: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		var opt hvd.Optimizer = sgd
		var dopt *hvd.DistributedOptimizer
		if distributed {
			if dopt, err = hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Compression: comp}); err != nil {
				t.Fatal(err)
			}
			opt = dopt
		}
		for step := range 3 {
			for i := range grads {
				p.Grad[i] = grads[i] * float64(step+1)
			}
			if dopt != nil {
				if err := dopt.GradReady("w"); err != nil {
					t.Fatal(err)
				}
			}
			if err := opt.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return slices.Clone(p.Value)
	}
	rt := hvdtest.Start(t, 1)[0]
	want := run(nil, hvd.NoCompression, false)
	before := rt.EngineStats().Batches
	if got := run(rt, hvd.NoCompression, true); !slices.Equal(got, want) {
		t.Errorf("alone, uncompressed: %v, want the plain optimizer's %v", got, want)
	}
	if n := rt.EngineStats().Batches - before; n != 0 {
		t.Errorf("alone, uncompressed: %d all-reduce batches, want none", n)
	}
	if got := run(rt, hvd.FP16Compression, true); slices.Equal(got, want) {
		t.Errorf("alone, fp16: %v, want the gradients rounded to float16", got)
	}
	if n := rt.EngineStats().Batches - before; n == 0 {
		t.Error("alone, fp16: no all-reduce, want the gradients through the engine")
	}
}
