// Command linreg is the first example of data-parallel training with
// gorovod: linear regression on a synthetic data set, one shard per rank,
// gradients averaged by hvd.DistributedOptimizer.
//
//	go build -o bin/linreg ./examples/linreg
//	bin/gorun -np 4 bin/linreg -epochs 5 -batch 16
//
// With the same seed and global batch (np × batch), every rank count ends
// at the same weights: the ranks together take exactly the batches that
// one rank takes alone.
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
		fmt.Fprintln(os.Stderr, "linreg:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("linreg", flag.ContinueOnError)
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "number of training samples")
	fs.IntVar(&cfg.Dim, "dim", cfg.Dim, "number of features")
	fs.Float64Var(&cfg.Noise, "noise", cfg.Noise, "standard deviation of the label noise")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "passes over the data")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "batch size per rank (the global batch is np × batch)")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "learning rate (of the global batch)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the data, the initial weights and the data order")
	comp := fs.String("compression", "none", "gradient wire type: none, fp32, fp16, bf16")
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
	out := os.Stdout
	if hvd.Rank() != 0 {
		out = nil // rank 0 speaks for the job
	}
	res, err := train(ctx, hvd.Default(), cfg, out)
	if err != nil {
		return err
	}
	if out != nil {
		fmt.Fprintf(out, "learned w = %.4f b = %.4f\n   true w = %.4f b = %.4f\n", res.W, res.B, res.TrueW, res.TrueB)
	}
	return nil
}
