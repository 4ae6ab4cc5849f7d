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

// On simplego, GoMLX's convolution and max-pooling train only through
// Trainable, which adds the operations their gradients use.
func ExampleTrainable() {
	plain, err := simplego.New("ops_sequential")
	if err != nil {
		fmt.Println(err)
		return
	}
	backend := hvdgomlx.Trainable(plain)
	// d/dk and d/dx of the sum of a 2×2 max-pooling of a 3×3 convolution.
	e, err := graph.NewExec(backend, func(x, k *graph.Node) (*graph.Node, *graph.Node) {
		y := graph.Convolve(x, k).PadSame().Done()
		loss := graph.ReduceAllSum(graph.MaxPool(y).Window(2).Done())
		g := graph.Gradient(loss, x, k)
		return g[0], g[1]
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float32, 16) // one 4×4 image, one channel: 0, 1, …, 15
	for i := range x {
		x[i] = float32(i)
	}
	k := []float32{0, 0, 0, 0, 1, 0, 0, 0, 0} // the identity kernel
	out, err := e.Exec(tensors.FromFlatDataAndDimensions(x, 1, 4, 4, 1), tensors.FromFlatDataAndDimensions(k, 3, 3, 1, 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("d/dx:", tensors.MustCopyFlatData[float32](out[0]))
	fmt.Println("d/dk:", tensors.MustCopyFlatData[float32](out[1]))
	// The gradient reaches x at each window's maximum, (1,1), (1,3), (3,1)
	// and (3,3); k's at offset (dy, dx) sums x at those places moved by
	// (dy−1, dx−1), zero outside the image: 0+2+8+10 = 20 for (0, 0).
	// Output:
	// d/dx: [0 0 0 0 0 1 0 1 0 0 0 0 0 1 0 1]
	// d/dk: [20 24 12 36 40 20 18 20 10]
}
