package collective_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// Three ranks in one process all-reduce a float32 vector. In a real job
// each rank is its own process and the transport is tcptransport.
func ExampleAllreduce() {
	ts := memtransport.NewNetwork(3).Transports()
	results := make([][]float32, 3)
	var wg sync.WaitGroup
	for r, t := range ts {
		wg.Go(func() {
			c := collective.NewComm(t, collective.Options{})
			defer c.Close()
			data := []float32{float32(r), 10}
			if err := collective.Allreduce(context.Background(), c, data, kernels.Sum, collective.ReduceOptions{}); err != nil {
				panic(err)
			}
			results[r] = data
		})
	}
	wg.Wait()
	fmt.Println(results)
	// Output: [[3 30] [3 30] [3 30]]
}
