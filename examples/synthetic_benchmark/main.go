// Command synthetic_benchmark measures data-parallel training throughput
// the way Horovod's synthetic benchmark does: a model with ResNet-50's
// gradient sizes (161 tensors, 25.6 M float32 parameters), synthetic data, and a
// compute step that is simulated (200 ms of sleep by default) or real
// (OpenBLAS matrix products). It first measures every rank alone (the
// -np 1 baseline), then all ranks together, and prints the scaling
// efficiency: total samples/s ÷ (np × baseline samples/s).
//
//	go build -o bin/synthetic_benchmark ./examples/synthetic_benchmark
//	bin/gorun -np 4 bin/synthetic_benchmark
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
)

// config holds the flags.
type config struct {
	Model                         string
	Params, Tensors               int
	Batch                         int
	Compute                       string
	StepTime                      time.Duration
	GemmN, Threads                int
	Warmup, Iters, BatchesPerIter int
	Float64                       bool // -dtype float64
	Compression                   hvd.Compression
	PowerSGD                      int     // PowerSGD rank of the gradient hook (0: none)
	TopK                          float64 // top-k fraction of the gradient hook (0: none)
	Baseline                      string
	Update                        bool
	InPlace                       bool   // all-reduce gradients in Grad (hvd.DistributedOptions.InPlace)
	Optimizer                     string // the -update's optimizer: sgd or adam
	ShardState                    bool   // hvd.DistributedOptions.ShardState
	Elastic                       bool   // run under hvd.RunElastic (gorun --min-np)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "synthetic_benchmark:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("synthetic_benchmark", flag.ContinueOnError)
	fs.StringVar(&c.Model, "model", "resnet50", "gradient layout: resnet50 (161 tensors, 25.6 M parameters) or uniform")
	fs.IntVar(&c.Params, "params", 25_000_000, "parameters of the uniform model")
	fs.IntVar(&c.Tensors, "tensors", 160, "tensors of the uniform model")
	fs.IntVar(&c.Batch, "batch", 32, "samples per step per rank (for the samples/s figures)")
	fs.StringVar(&c.Compute, "compute", "sleep", "per-step compute: sleep (simulated, -step-time) or gemm (real OpenBLAS products)")
	fs.DurationVar(&c.StepTime, "step-time", 200*time.Millisecond, "simulated compute per step")
	fs.IntVar(&c.GemmN, "gemm-n", 256, "matrix size of the gemm compute")
	fs.IntVar(&c.Threads, "threads", 0, "OpenBLAS threads per rank (0: CPUs / ranks on this host)")
	fs.IntVar(&c.Warmup, "warmup", 5, "untimed warm-up steps")
	fs.IntVar(&c.Iters, "iters", 10, "timed iterations")
	fs.IntVar(&c.BatchesPerIter, "batches-per-iter", 5, "steps per timed iteration")
	dtype := fs.String("dtype", "float32", "parameter and gradient type: float32 (as ResNet-50 trains) or float64")
	comp := fs.String("compression", "none", "gradient wire type: none (the -dtype), fp32, fp16, bf16")
	fs.IntVar(&c.PowerSGD, "powersgd", 0, "send each weight matrix's gradient as rank-r PowerSGD factors (hvd/compress; resnet50's shapes; 0: off)")
	fs.Float64Var(&c.TopK, "topk", 0, "send the largest-magnitude fraction of each gradient of 1024 values or more (hvd/compress; 0: off)")
	fs.StringVar(&c.Baseline, "baseline", "rank0", "np 1 baseline: rank0 (rank 0 alone, the others idle), concurrent (every rank alone, all at the same time), none")
	fs.BoolVar(&c.Update, "update", false, "apply an SGD update every step (off: the step is compute and communication only)")
	fs.BoolVar(&c.Elastic, "elastic", false, "run as an elastic job (start with gorun --min-np N): commit after every step, go on when ranks are lost, and report how long each reset took and what a commit costs")
	fs.BoolVar(&c.InPlace, "in-place", true, "all-reduce each gradient that travels in its own type where it lies, as Horovod does with a framework's gradients (false: through a copy, the optimizer's default)")
	fs.StringVar(&c.Optimizer, "optimizer", "sgd", "the optimizer of -update: sgd (no state) or adam (two moments per parameter)")
	fs.BoolVar(&c.ShardState, "shard-state", false, "keep only this rank's 1/np part of the optimizer state (needs -update): gradients are reduce-scattered, the updated values all-gathered (ZeRO stage 1)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.Optimizer != "sgd" && c.Optimizer != "adam":
		return c, fmt.Errorf("-optimizer %q: want sgd or adam", c.Optimizer)
	case c.ShardState && !c.Update:
		return c, fmt.Errorf("-shard-state shards the state of an update: add -update")
	case c.ShardState && c.Elastic:
		return c, fmt.Errorf("-shard-state is not supported with -elastic (the elastic state keeps the wrapped optimizer)")
	}
	switch *dtype {
	case "float32":
	case "float64":
		c.Float64 = true
	default:
		return c, fmt.Errorf("-dtype %q: want float32 or float64", *dtype)
	}
	var err error
	if c.Compression, err = hvd.ParseCompression(*comp); err != nil {
		return c, err
	}
	_, err = c.options()
	return c, err
}

// options are the DistributedOptimizer's options the flags choose.
func (c config) options() (hvd.DistributedOptions, error) {
	o := hvd.DistributedOptions{Compression: c.Compression, InPlace: c.InPlace, ShardState: c.ShardState}
	switch {
	case c.PowerSGD < 0 || c.TopK < 0 || c.TopK > 1:
		return o, fmt.Errorf("-powersgd %d must be at least 0 and -topk %v within [0, 1]", c.PowerSGD, c.TopK)
	case (c.PowerSGD > 0 || c.TopK > 0) && (c.Compression != hvd.NoCompression || c.PowerSGD > 0 && c.TopK > 0):
		return o, fmt.Errorf("-powersgd, -topk and -compression exclude each other")
	case c.ShardState && (c.PowerSGD > 0 || c.TopK > 0):
		return o, fmt.Errorf("-shard-state takes no -powersgd or -topk")
	case c.PowerSGD > 0:
		o.Hook = &compress.PowerSGD{Rank: c.PowerSGD}
	case c.TopK > 0:
		o.Hook = &compress.TopK{Fraction: c.TopK, MinLen: 1024}
	}
	return o, nil
}

// hookName describes the hook, "" for none.
func (c config) hookName() string {
	switch {
	case c.PowerSGD > 0:
		return fmt.Sprintf("PowerSGD factors of rank %d", c.PowerSGD)
	case c.TopK > 0:
		return fmt.Sprintf("the top %g%% (index, value) pairs", 100*c.TopK)
	}
	return ""
}

func run(args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	specs, err := modelSpec(cfg.Model, cfg.Params, cfg.Tensors)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if cfg.Elastic {
		return runElastic(ctx, cfg, specs)
	}
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	rt := hvd.Default()
	setThreads(max(1, runtime.NumCPU()/rt.LocalSize()))
	if cfg.Threads > 0 {
		setThreads(cfg.Threads)
	}
	b, err := newBench(cfg, specs, rt.Rank())
	if err != nil {
		return err
	}
	return report(ctx, rt, b, specs)
}

func newBench(cfg config, specs []tensorSpec, rank int) (*bench, error) {
	b := &bench{cfg: cfg}
	for _, s := range specs {
		var p *hvd.Param
		if cfg.Float64 {
			p = hvd.NewParam(s.name, s.size)
			for i := range p.Grad {
				p.Grad[i] = float64(i%13) / 13
			}
		} else {
			p = hvd.NewParam32(s.name, s.size)
			for i := range p.Grad32 {
				p.Grad32[i] = float32(i%13) / 13
			}
		}
		p.Shape = s.shape
		b.params = append(b.params, p)
	}
	switch cfg.Compute {
	case "sleep":
		b.compute = &sleepCompute{step: cfg.StepTime}
	case "gemm":
		b.compute = newGemmCompute(cfg.GemmN, len(specs))
	default:
		return nil, fmt.Errorf("-compute %q: want sleep or gemm", cfg.Compute)
	}
	if rank == 0 {
		b.out = os.Stdout
	}
	return b, nil
}
