// Command mnist trains a classifier of Fashion-MNIST with data-parallel
// SGD: one rank per process, gradients averaged by
// hvd.DistributedOptimizer, matrix products by OpenBLAS through gosl's
// la/oblas.
//
//	go build -o bin/mnist ./examples/mnist
//	bin/gorun -np 4 bin/mnist -epochs 5 -checkpoint-dir /tmp/mnist
//	bin/gorun -np 4 --min-np 2 bin/mnist -elastic   # survives lost ranks
//	bin/gorun --ps 2 -np 2 --evaluator bin/mnist -mode ps -checkpoint-dir /tmp/ps
//
// Without Fashion-MNIST installed (apt-get install dataset-fashion-mnist)
// it says so and trains on a small synthetic set instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

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
	prof := fs.String("cpuprofile", "", "write a CPU profile of this rank to this file (%d: the rank's number)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.Compression, err = hvd.ParseCompression(*comp); err != nil {
		return err
	}
	ctx := context.Background()
	role, err := hvd.Role()
	if err != nil {
		return err
	}
	switch {
	case cfg.InitOut != "":
		return writeInit(cfg, cfg.InitOut, os.Stdout)
	case cfg.Mode == modeEvaluator || role == "evaluator":
		return evaluate(ctx, cfg, os.Stdout)
	case cfg.Mode == modePS:
		if cfg.Elastic {
			return errors.New("-elastic is for -mode allreduce: a ps-mode job already survives lost workers")
		}
		if *prof != "" { // %d: the task's rank (gorun's GOROVOD_RANK)
			stop, err := startProfile(strings.ReplaceAll(*prof, "%d", os.Getenv("GOROVOD_RANK")))
			if err != nil {
				return err
			}
			defer stop()
		}
		return trainPS(ctx, cfg, os.Stdout)
	case cfg.Mode != modeAllReduce:
		return fmt.Errorf("unknown -mode %q (want allreduce, ps or evaluator)", cfg.Mode)
	}
	if cfg.Elastic {
		return trainElastic(ctx, cfg, os.Stdout)
	}
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	rt := hvd.Default()
	if *prof != "" {
		stop, err := startProfile(strings.ReplaceAll(*prof, "%d", strconv.Itoa(rt.Rank())))
		if err != nil {
			return err
		}
		defer stop()
	}
	setThreads(cfg.threads(rt.LocalSize()))
	out := os.Stdout
	if rt.Rank() != 0 {
		out = nil // rank 0 speaks for the job
	}
	_, err = train(ctx, rt, cfg, out)
	return err
}

// startProfile starts a CPU profile into path; the returned function ends
// it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
