package hvd_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// The lines a training loop adds to run data-parallel: Init, wrap the
// optimizer, broadcast rank 0's parameters, report each gradient as the
// backward pass produces it. Outside gorun the job has one rank.
func ExampleDistributedOptimizer() {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		panic(err)
	}
	defer hvd.Shutdown()

	w, b := hvd.NewParam("fc/w", 2), hvd.NewParam("fc/b", 1)
	// The global batch grows with the job: scale the rate with it.
	sgd, err := hvd.NewSGD([]*hvd.Param{w, b}, hvd.SGDConfig{LR: 0.1 * float64(hvd.Size()), Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, nil, hvd.DistributedOptions{Compression: hvd.FP16Compression})
	if err != nil {
		panic(err)
	}
	if err := hvd.BroadcastParameters(ctx, nil, opt.Params(), 0); err != nil {
		panic(err)
	}
	for range 3 {
		// backward pass, last layer first: each gradient's all-reduce
		// starts while the earlier layers are still being differentiated.
		b.Grad[0] = 1
		opt.GradReady("fc/b")
		w.Grad[0], w.Grad[1] = 0.5, -0.5
		opt.GradReady("fc/w")
		if err := opt.Step(ctx); err != nil { // waits, averages, updates
			panic(err)
		}
	}
	fmt.Printf("w = [%.3f %.3f], b = %.3f\n", w.Value[0], w.Value[1], b.Value[0])
	// Output: w = [-0.281 0.281], b = -0.561
}

// Four ranks in one process over an in-memory network (as the tests run
// them): each computes a different gradient, and all apply their mean.
func ExampleDistributedOptimizer_fourRanks() {
	err := hvdtest.Run(4, func(rt *hvd.Runtime) error {
		w := hvd.NewParam("w", 1)
		sgd, _ := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{LR: 1})
		opt, _ := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
		w.Grad[0] = float64(rt.Rank()) // 0, 1, 2, 3: mean 1.5
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println("every rank's w:", w.Value[0])
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output: every rank's w: -1.5
}

// A float32 model: its gradients are all-reduced as float32, with no
// conversion, and the optimizer writes float32 values back. (Alone, as
// here, the job has one rank; under gorun the gradients are averaged.)
func ExampleNewParam32() {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		panic(err)
	}
	defer hvd.Shutdown()

	w := hvd.NewParam32("conv1/w", 2)
	sgd, _ := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{LR: 0.5})
	opt, _ := hvd.NewDistributedOptimizer(sgd, nil, hvd.DistributedOptions{})
	w.Grad32[0], w.Grad32[1] = 0.5, 1
	if err := opt.Step(ctx); err != nil {
		panic(err)
	}
	fmt.Println(w.DType(), w.Value32)
	// Output: float32 [-0.25 -0.5]
}
