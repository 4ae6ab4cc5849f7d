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

// An ElasticSampler deals an epoch out to the ranks of a job whose size
// changes: after two steps at 3 ranks, the 2 ranks of the job formed anew
// share only the samples not processed yet.
func ExampleElasticSampler() {
	s, _ := hvd.NewElasticSampler(20, 2, 0, false) // 20 samples, 2 per rank per step, in order
	for range 2 {
		fmt.Println("3 ranks:", s.Batch(0, 3), s.Batch(1, 3), s.Batch(2, 3))
		s.Advance(3)
	}
	for s.StepsLeft(2) > 0 {
		fmt.Println("2 ranks:", s.Batch(0, 2), s.Batch(1, 2))
		s.Advance(2)
	}
	// Output:
	// 3 ranks: [0 3] [1 4] [2 5]
	// 3 ranks: [6 9] [7 10] [8 11]
	// 2 ranks: [12 14] [13 15]
	// 2 ranks: [16 18] [17 19]
}
