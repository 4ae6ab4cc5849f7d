// Command gorgonia trains a convolutional network built with Gorgonia's
// own ops (conv2d, max-pool, dense, ReLU, log-softmax cross-entropy) on
// Fashion-MNIST, data-parallel under gorun:
//
//	gorun -np 4 go run .
//
// Every rank trains on its shard of each epoch's shuffled training set;
// hvdgorgonia.DistributedSolver averages the gradients before Gorgonia's
// solver steps. -batch is the global batch, split evenly among the ranks,
// so that every process count takes the same steps over the same epochs.
// Without Fashion-MNIST in -data (Debian: apt-get install
// dataset-fashion-mnist) it trains on a synthetic set of the same shape.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/gorovod/gorovod/hvd"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.DataDir, "data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST .gz IDX files")
	flag.IntVar(&cfg.Epochs, "epochs", 2, "epochs")
	flag.IntVar(&cfg.Batch, "batch", 64, "global batch size, split evenly among the ranks")
	flag.IntVar(&cfg.EvalBatch, "eval-batch", 500, "test batch size")
	flag.Float64Var(&cfg.LR, "lr", 0.002, "learning rate")
	flag.StringVar(&cfg.Solver, "solver", "adam", "Gorgonia solver: adam, sgd or momentum")
	flag.IntVar(&cfg.Arch.F1, "filters1", 8, "filters of the first convolution")
	flag.IntVar(&cfg.Arch.F2, "filters2", 16, "filters of the second convolution")
	flag.IntVar(&cfg.Arch.Hidden, "hidden", 64, "units of the hidden dense layer")
	flag.IntVar(&cfg.TrainLimit, "train-limit", 0, "train on the first N training images only (0: all)")
	flag.IntVar(&cfg.TestLimit, "test-limit", 0, "test on the first N test images only (0: all)")
	flag.IntVar(&cfg.SynthTrain, "synth-train", 6000, "training images of the synthetic set (without Fashion-MNIST)")
	flag.IntVar(&cfg.SynthTest, "synth-test", 1000, "test images of the synthetic set (without Fashion-MNIST)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the initial weights and the shuffles")
	flag.Parse()

	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gorgonia:", err)
		os.Exit(1)
	}
	_, err := train(ctx, hvd.Default(), cfg, os.Stdout)
	if serr := hvd.Shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorgonia: rank %d: %v\n", hvd.Rank(), err)
		os.Exit(1)
	}
}
