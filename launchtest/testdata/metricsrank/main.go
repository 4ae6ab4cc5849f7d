// Command metricsrank is the rank program of the metrics launcher test: it
// all-reduces a vector and publishes two scalars (loss = 1/step and
// rank = its rank) with hvd.LogScalars at each of its 50 steps, sleeping
// 10 ms a step, so that several sends happen during the run.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

const steps = 50

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "metricsrank:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	for step := int64(1); step <= steps; step++ {
		g := hvd.NewTensor("grad", make([]float32, 4096))
		if err := hvd.Allreduce(ctx, g, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		hvd.LogScalars(step, map[string]float64{"loss": 1 / float64(step), "rank": float64(hvd.Rank())})
		time.Sleep(10 * time.Millisecond)
	}
	return hvd.Shutdown()
}
