package hvdgomlx_test

import (
	stdctx "context"
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	hvdgomlx "github.com/gorovod/gorovod/frameworks/gomlx"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// Two ranks (in one process here; under gorun, one process each, with
// hvd.Init and hvd.Default()) train a linear model with GoMLX's Trainer and
// Adam on different data; the wrapped optimizer keeps their weights equal.
func Example() {
	// The pure-Go backend; "ops_sequential" runs a graph's operations one at
	// a time (its parallel scheduler trips the race detector, which runs
	// this example in the tests). Programs use backends.MustNew().
	backend, err := simplego.New("ops_sequential")
	if err != nil {
		fmt.Println(err)
		return
	}
	err = hvdtest.Run(2, func(rt *hvd.Runtime) error {
		opt, err := hvdgomlx.New(rt, backend, optimizers.Adam().LearningRate(0.1).Done())
		if err != nil {
			return err
		}
		model := func(ctx *context.Context, _ any, in []*graph.Node) []*graph.Node {
			return []*graph.Node{layers.DenseWithBias(ctx, in[0], 1)}
		}
		trainer := train.NewTrainer(backend, context.New(), model, losses.MeanSquaredError, opt, nil, nil)
		r := float32(rt.Rank())
		x := tensors.FromValue([][]float32{{1, r}, {r, 2}})
		y := tensors.FromValue([][]float32{{3}, {1 - r}})
		for range 20 {
			if _, err := trainer.TrainStep(nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}); err != nil {
				return err
			}
			if err := opt.Step(stdctx.Background()); err != nil {
				return err
			}
		}
		// Compare the weights: the maximum minus the minimum across ranks.
		w := tensors.MustCopyFlatData[float32](trainer.Context().In("dense").GetVariable("weights").MustValue())
		lo, hi := append([]float32(nil), w...), append([]float32(nil), w...)
		if err := rt.Allreduce(stdctx.Background(), hvd.NewTensor("min", lo), kernels.Min, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if err := rt.Allreduce(stdctx.Background(), hvd.NewTensor("max", hi), kernels.Max, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println("global step:", trainer.GlobalStep())
			fmt.Println("weights equal on both ranks:", fmt.Sprint(lo) == fmt.Sprint(hi))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// global step: 20
	// weights equal on both ranks: true
}
