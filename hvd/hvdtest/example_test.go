package hvdtest_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// Four ranks in this process sum their ranks; rank 0 prints the result.
func ExampleRun() {
	err := hvdtest.Run(4, func(rt *hvd.Runtime) error {
		x := hvd.NewTensor("x", []int32{int32(rt.Rank())})
		if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println("sum of the ranks of", rt.Size(), "ranks:", hvd.Values[int32](x)[0])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: sum of the ranks of 4 ranks: 6
}
