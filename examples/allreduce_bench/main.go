// Command allreduce_bench measures gorovod's ring all-reduce in the manner of
// nccl-tests: for each size it prints the median time over samples and the
// algorithm and bus bandwidths. It runs as the ranks of a job that a
// launcher started (bin/gorun -np 4 bin/allreduce_bench, or srun, mpirun,
// ...); on its own it is one rank of size 1. See README.md for how to run
// it next to the peer libraries.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

const defaultSizes = "4K,16K,64K,256K,1M,4M,16M,64M,256M"

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce_bench:", err)
		os.Exit(1)
	}
}

// run parses args and joins the job that the environment (read through
// getenv) describes; rank 0 prints the results to out.
func run(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("allreduce_bench", flag.ContinueOnError)
	sizes := fs.String("sizes", defaultSizes, "bytes per rank, comma separated, K/M/G suffixes allowed")
	dtype := fs.String("dtype", "float32", "element type: float32 float64 float16 bfloat16 int32 int64 uint8")
	op := fs.String("op", "sum", "reduction: sum min max prod avg")
	warmup := fs.Int("warmup", 0, "max warm-up calls per size (0: 200 for small sizes down to 1 for 256M)")
	iters := fs.Int("iters", 0, "max timed samples per size (0: 200 for small sizes down to 5 for 256M)")
	budget := fs.Float64("budget", 1.5, "seconds of timed samples per size (at least 3 samples)")
	warmBudget := fs.Float64("warm-budget", 0.5, "seconds of warm-up per size (at least 1 call)")
	csv := fs.Bool("csv", false, "print RESULT,... lines and '# done' (as peers/mpi_allreduce.c prints them)")
	label := fs.String("label", "gorovod", "label of the RESULT lines")
	segment := fs.Int("segment", 0, "pipeline segment in bytes (0: the library default, 1 MiB on one host and 256 KiB across hosts)")
	inline := fs.Int("inline", 0, "largest buffer in bytes run inline, without pipelining goroutines (0: the library default)")
	doubling := fs.Int("doubling", 0, "largest flat all-reduce in bytes by recursive doubling (0: the library default, twice -inline; -1: up to -inline only)")
	halving := fs.Int("halving", 0, "largest flat all-reduce in bytes by halving-doubling on a power of two ranks above 2 (0: the library default, 2 MiB where every link is TCP; -1: never)")
	via := fs.String("via", "comm", "what the all-reduces go through: comm (the communicator itself) or hvd (the runtime's engine: a blocking hvd.Allreduce of a named tensor, negotiated)")
	parts := fs.Int("parts", 1, "with -via comm, tensors the buffer is cut into and reduced as one fused batch (AllreduceVec), as training gradients are")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := config{warmup: *warmup, iters: *iters, budget: *budget, warmBudget: *warmBudget, csv: *csv, label: *label, via: *via, parts: *parts}
	if *parts < 1 {
		return fmt.Errorf("-parts: %d is not a positive count", *parts)
	}
	if *via != "comm" && *via != "hvd" {
		return fmt.Errorf("-via: %q is neither comm nor hvd", *via)
	}
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		return err
	}
	if cfg.dtype, err = kernels.ParseDType(*dtype); err != nil {
		return err
	}
	if cfg.op, err = kernels.ParseOp(*op); err != nil {
		return err
	}
	hcfg, err := hvd.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	hcfg.Comm = collective.Options{SegmentBytes: *segment, InlineBytes: *inline, DoublingBytes: *doubling, HalvingBytes: *halving}
	return bench(context.Background(), hcfg, cfg, out)
}

// parseSizes reads "4096,64K,1M" into byte counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := 1
		switch strings.ToUpper(f[len(f)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		}
		if mult > 1 {
			f = f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: bad size %q", f)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-sizes: no size given")
	}
	return out, nil
}

// bench joins the job as hcfg says, as any training program does (under
// gorun, srun, mpirun, ...; a rank of size 1 without a launcher), and runs
// the sweep.
func bench(ctx context.Context, hcfg hvd.Config, cfg config, out io.Writer) error {
	rt, err := hvd.NewRuntime(ctx, hcfg)
	if err != nil {
		return err
	}
	defer rt.Shutdown()
	hvd.ShareProcessors(rt) // as hvd.Init would
	if cfg.via == "hvd" {
		return sweep(ctx, &hvdJob{rt: rt}, cfg, out)
	}
	return sweep(ctx, &commJob{c: rt.Comm(), parts: cfg.parts}, cfg, out)
}
