package hvd_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// bf16Feedback is a GradientHook: it sends gradients as bfloat16 and keeps
// what the rounding lost as a residual that goes out with the next step's
// gradient (error feedback), in the gradient's state.
type bf16Feedback struct{}

func (bf16Feedback) ReduceGradient(ctx context.Context, g *hvd.HookGradient) error {
	resid, _ := g.State("residual", len(g.Values))
	f := make([]float32, len(g.Values))
	for i := range g.Values {
		g.Values[i] += resid[i]
		f[i] = float32(g.Values[i])
	}
	b := make([]kernels.BFloat16, len(f))
	kernels.F32ToBF16(b, f) // what the wire will carry
	kernels.BF16ToF32(f, b)
	for i, v := range f {
		resid[i] = g.Values[i] - float64(v)
	}
	return g.AllreduceAs(ctx, "", g.Values, kernels.BF16)
}

// A hook of one's own: bfloat16 on the wire with error feedback. Each of
// two ranks has the gradient 1.001 every step, which bfloat16 (8
// significant bits) rounds to 1: without the residuals every step's sum
// would be 2. With them a step now and then sends 1.0078, and the sum's
// mean over the steps is the true 2.002 to within one step's rounding.
func ExampleGradientHook() {
	err := hvdtest.Run(2, func(rt *hvd.Runtime) error {
		w := hvd.NewParam("w", 1)
		sgd, err := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{LR: 1})
		if err != nil {
			return err
		}
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: bf16Feedback{}, Op: kernels.Sum})
		if err != nil {
			return err
		}
		var sum float64
		const steps = 100
		for range steps {
			w.Grad[0] = 1.001
			if err := opt.Step(context.Background()); err != nil {
				return err
			}
			sum += w.Grad[0]
		}
		if rt.Rank() == 0 {
			fmt.Printf("mean sum over %d steps: %.4f\n", steps, sum/steps)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// mean sum over 100 steps: 2.0020
}
