// Command gomlx trains a convolutional network built with GoMLX's own
// layers on Fashion-MNIST, data-parallel under gorun with the hvdgomlx
// adapter, on GoMLX's pure-Go backend:
//
//	gorun -np 4 go run . -epochs 2
//
// Every rank trains on its shard of each epoch's shuffle (hvd.ShuffledShard)
// with a per-rank batch of -batch/np, so the global batch, and the
// arithmetic, stay the same at every process count; rank 0 prints.
package main

import (
	stdctx "context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"github.com/gomlx/gomlx/backends/simplego"

	hvdgomlx "github.com/gorovod/gorovod/frameworks/gomlx"

	"github.com/gorovod/gorovod/hvd"
)

func main() {
	if err := mainErr(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gomlx:", err)
		os.Exit(1)
	}
}

func mainErr(args []string) error {
	var cfg config
	fl := flag.NewFlagSet("gomlx", flag.ContinueOnError)
	fl.StringVar(&cfg.data, "data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST IDX files (train-images-idx3-ubyte.gz, …); synthetic data when they are missing")
	fl.BoolVar(&cfg.synthetic, "synthetic", false, "train on synthetic images instead of Fashion-MNIST")
	fl.IntVar(&cfg.trainN, "train", 0, "training examples used, the first ones (0: all)")
	fl.IntVar(&cfg.testN, "test", 0, "test examples used, the first ones (0: all)")
	fl.IntVar(&cfg.epochs, "epochs", 2, "epochs")
	fl.IntVar(&cfg.batch, "batch", 64, "global batch, a multiple of the number of processes")
	fl.Float64Var(&cfg.lr, "lr", 0.002, "Adam's learning rate")
	seed := fl.Uint64("seed", 1, "seed of the shuffles and of rank 0's initial weights")
	fl.BoolVar(&cfg.plain, "plain", false, "one process, GoMLX's own optimizer without the adapter (to measure the adapter's overhead)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	cfg.seed = *seed

	ctx := stdctx.Background()
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	rt := hvd.Default()

	tr, te, source, err := load(cfg)
	if err != nil {
		return err
	}
	// Init gave this rank its share of the host's processors
	// (GOMAXPROCS); simplego would otherwise start a worker per CPU in
	// every rank. ops_sequential runs one operation at a time, each
	// splitting its work over the workers: simplego v0.26.0's parallel
	// executor deadlocked here at parallelism 1 (np 2 on 2 CPUs), two
	// matrix products holding both worker slots while each waited for
	// one more.
	plain, err := simplego.New(fmt.Sprintf("parallelism=%d,ops_sequential", runtime.GOMAXPROCS(0)))
	if err != nil {
		return err
	}
	// simplego differentiates neither the convolution nor the max-pooling
	// on its own; Trainable adds what their gradients need.
	backend := hvdgomlx.Trainable(plain)
	if rt.Rank() == 0 {
		fmt.Printf("%s: %d training and %d test examples; np %d, global batch %d (%d a rank), %d epochs, backend %s\n",
			source, tr.len(), te.len(), rt.Size(), cfg.batch, cfg.batch/rt.Size(), cfg.epochs, backend.Name())
	}
	res, err := run(rt, backend, cfg, tr, te)
	if err != nil {
		return err
	}
	if rt.Rank() == 0 {
		fmt.Printf("steps %d, last batch loss %.4f, test accuracy %.2f%%\n", res.steps, res.loss, 100*res.accuracy)
		fmt.Printf("train %.1f s: %.0f samples/s overall, %.0f samples/s at the median step (%.2f ms)\n",
			res.wall.Seconds(), res.throughput(), res.steadyThroughput(cfg.batch), float64(res.median.Microseconds())/1000)
	}
	return nil
}

// load returns the training and test sets that cfg asks for and says
// where they came from.
func load(cfg config) (tr, te set, source string, err error) {
	if !cfg.synthetic {
		tr, te, err = loadFashion(cfg.data)
		if err == nil {
			return tr.limit(cfg.trainN), te.limit(cfg.testN), "Fashion-MNIST", nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return tr, te, "", err
		}
		fmt.Fprintf(os.Stderr, "gomlx: %v: training on synthetic data\n", err)
	}
	n, m := cfg.trainN, cfg.testN
	if n <= 0 {
		n = 60000
	}
	if m <= 0 {
		m = 10000
	}
	return synthetic(n, cfg.seed), synthetic(m, cfg.seed+1), "synthetic", nil
}
