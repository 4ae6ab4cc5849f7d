package hvd_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// Four ranks split into the even and the odd ranks; each half sums its
// ranks on its own, and rank 0 prints its half's result.
func ExampleRuntime_AddProcessSet() {
	err := hvdtest.Run(4, func(rt *hvd.Runtime) error {
		ctx := context.Background()
		evens, err := rt.AddProcessSet(ctx, []int{0, 2}) // every rank adds every set
		if err != nil {
			return err
		}
		odds, err := rt.AddProcessSet(ctx, []int{1, 3})
		if err != nil {
			return err
		}
		mine, other := evens, odds
		if !mine.Included() {
			mine, other = odds, evens
		}
		x := hvd.NewTensor("x", []int32{int32(rt.Rank())})
		if err := mine.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		outside := other.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{})
		if rt.Rank() == 0 {
			fmt.Println(mine, "sums its ranks to", hvd.Values[int32](x)[0])
			fmt.Println("outside", other, "fails:", errors.Is(outside, hvd.ErrNotInProcessSet))
		}
		if err := rt.RemoveProcessSet(ctx, odds); err != nil {
			return err
		}
		return rt.RemoveProcessSet(ctx, evens)
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// process set 1 (ranks [0 2]) sums its ranks to 2
	// outside process set 2 (ranks [1 3]) fails: true
}
