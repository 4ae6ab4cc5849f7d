// Command hello initialises gorovod, all-reduces one int32 and exits: the
// launcher's start-to-exit reference, the counterpart of peers/mpi_hello.c
// beside it. Under `gorun -np 4` rank 0 prints
// "size=4 sum=10".
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	x := hvd.NewTensor("x", []int32{int32(hvd.Rank() + 1)})
	if err := hvd.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return err
	}
	n, sum := hvd.Size(), hvd.Values[int32](x)[0]
	if hvd.Rank() == 0 {
		fmt.Printf("size=%d sum=%d\n", n, sum)
	}
	if int(sum) != n*(n+1)/2 {
		return fmt.Errorf("sum %d, want %d", sum, n*(n+1)/2)
	}
	return nil
}
