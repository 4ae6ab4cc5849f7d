package hvd_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// With ShardState each of two ranks keeps Adam's moments for its part of
// the five values only, and both end the step with the same whole
// parameter; State gathers the parts (every rank calls it).
func ExampleDistributedOptions_shardState() {
	lines := make([]string, 2)
	err := hvdtest.Run(2, func(rt *hvd.Runtime) error {
		w := hvd.NewParam("w", 5)
		adam, err := hvd.NewAdam([]*hvd.Param{w}, hvd.AdamConfig{LR: 0.1})
		if err != nil {
			return err
		}
		opt, err := hvd.NewDistributedOptimizer(adam, rt, hvd.DistributedOptions{ShardState: true})
		if err != nil {
			return err
		}
		for i := range w.Grad {
			w.Grad[i] = float64(rt.Rank() + i)
		}
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		lo, hi, _ := opt.ShardRange("w")
		st := opt.State()
		lines[rt.Rank()] = fmt.Sprintf("rank %d keeps w[%d:%d] (%d bytes of state); w = %.3f; gathered m = %.2f",
			rt.Rank(), lo, hi, opt.StateBytes(), w.Value, st.Slots["adam.m/w"])
		return nil
	})
	if err != nil {
		panic(err)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0 keeps w[0:3] (48 bytes of state); w = [-0.100 -0.100 -0.100 -0.100 -0.100]; gathered m = [0.05 0.15 0.25 0.35 0.45]
	// rank 1 keeps w[3:5] (32 bytes of state); w = [-0.100 -0.100 -0.100 -0.100 -0.100]; gathered m = [0.05 0.15 0.25 0.35 0.45]
}
