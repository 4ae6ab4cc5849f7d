package hvd_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// Outside gorun, Init makes this process a job of one rank, so the same
// program runs alone or under `gorun -np 4`.
func Example() {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		panic(err)
	}
	defer hvd.Shutdown()

	grad := hvd.NewTensor("layer1/grad", []float32{0.5, -1, 2})
	if err := hvd.Allreduce(ctx, grad, kernels.Average, hvd.ReduceOptions{}); err != nil {
		panic(err)
	}
	fmt.Println(hvd.Rank(), hvd.Size(), hvd.Values[float32](grad))
	// Output: 0 1 [0.5 -1 2]
}
