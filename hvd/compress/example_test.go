package compress_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// A DistributedOptimizer that sends each gradient matrix as its rank-1
// PowerSGD factors. Here two in-process ranks (hvdtest) have gradients of
// rank 1, u·vᵀ and 3·u·vᵀ, which rank 1 carries exactly: their mean,
// 2·u·vᵀ, arrives whole, from 2+3 values a rank instead of 6.
func ExamplePowerSGD() {
	u, v := []float64{1, 2}, []float64{1, 0, -1}
	err := hvdtest.Run(2, func(rt *hvd.Runtime) error {
		w := hvd.NewParam("w", 6)
		w.Shape = []int{2, 3} // PowerSGD reshapes gradients by Shape
		sgd, err := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{LR: 0.5})
		if err != nil {
			return err
		}
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{
			Hook: &compress.PowerSGD{Rank: 1, MinCompressionRate: 1},
		})
		if err != nil {
			return err
		}
		scale := float64(1 + 2*rt.Rank())
		for i := range 2 {
			for j := range 3 {
				w.Grad[i*3+j] = scale * u[i] * v[j]
			}
		}
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println("mean gradient:", w.Grad)
			fmt.Println("weights:", w.Value)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// mean gradient: [2 0 -2 4 0 -4]
	// weights: [-1 0 1 -2 0 2]
}
