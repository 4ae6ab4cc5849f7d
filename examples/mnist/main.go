// Command mnist trains a classifier of Fashion-MNIST with data-parallel
// SGD: one rank per process, gradients averaged by
// hvd.DistributedOptimizer, matrix products by OpenBLAS through gosl's
// la/oblas.
//
//	go build -o bin/mnist ./examples/mnist
//	bin/gorun -np 4 bin/mnist -epochs 5 -checkpoint-dir /tmp/mnist
//
// Without Fashion-MNIST installed (apt-get install dataset-fashion-mnist)
// it says so and trains on a small synthetic set instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/gorovod/gorovod/hvd"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg config
	fs := flag.NewFlagSet("mnist", flag.ContinueOnError)
	comp := cfg.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.Compression, err = hvd.ParseCompression(*comp); err != nil {
		return err
	}
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	rt := hvd.Default()
	setThreads(cfg.threads(rt.LocalSize()))
	out := os.Stdout
	if rt.Rank() != 0 {
		out = nil // rank 0 speaks for the job
	}
	_, err = train(ctx, rt, cfg, out)
	return err
}
