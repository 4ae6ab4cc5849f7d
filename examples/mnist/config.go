package main

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
	"github.com/gorovod/gorovod/kernels"
)

// config is everything a run is told on its command line.
type config struct {
	Model       string
	Optimizer   string
	Hidden      int
	Epochs      int
	Batch       int // per rank
	LR          float64
	Momentum    float64
	WeightDecay float64
	Warmup      float64 // epochs of learning-rate warm-up to LR × size
	Milestones  []float64
	Gamma       float64
	Seed        uint64
	Compression hvd.Compression
	PowerSGD    int     // PowerSGD rank of the gradient hook; 0: none
	TopK        float64 // top-k fraction of the gradient hook; 0: none
	HookWarmup  int     // steps with whole gradients before the hook compresses
	TopKPlain   bool    // -topk without momentum correction
	Adasum      bool    // reduce gradients with Adasum, at one rank's learning rate
	ShardState  bool    // keep each rank's part of the optimizer state only (hvd.DistributedOptions.ShardState)
	DataDir     string
	SynthTrain  int
	SynthTest   int
	LimitTrain  int // use only the first images of the training set (0: all)
	LimitTest   int // and of the test set
	CkptDir     string
	CkptEvery   int // steps between checkpoints; 0: at the end of each epoch
	Keep        int
	Resume      bool
	MaxSteps    int64  // stop after this many steps in all (0: run every epoch)
	LogEvery    int    // steps between progress lines; 0: ten per epoch
	Threads     int    // OpenBLAS threads; 0: CPUs / ranks on this host
	Elastic     bool   // train through hvd.RunElastic (gorun --min-np)
	CommitEvery int    // steps between elastic commits
	Mode        string // allreduce, ps or evaluator
	EvalFinal   int64  // evaluator: stop after the checkpoint of this step (0: ps mode's last step, or never)
	EvalMax     int    // evaluator: stop after this many evaluations (0: no limit)
	PSWire      string // ps mode: float64 or float32 values between workers and servers
	// Heartbeat is -mode ps's ps.Program.HeartbeatTimeout: how long a
	// silent worker keeps its steps (0: ps.DefaultHeartbeatTimeout).
	Heartbeat time.Duration
	// Staleness is -mode ps's ps.Program.Staleness: 0 asynchronous, K a
	// stale-synchronous bound of K pushes.
	Staleness int
	// InitOut, when set, is where -write-init writes the initial
	// parameters and the data order for a peer (see writeInit); the
	// program then exits without training.
	InitOut string
}

// flags registers cfg's fields on fs; compression is parsed afterwards.
func (cfg *config) flags(fs *flag.FlagSet) *string {
	fs.StringVar(&cfg.Model, "model", "mlp", "model: mlp or cnn")
	fs.StringVar(&cfg.Optimizer, "optimizer", "sgd", "sgd (momentum -momentum) or adam (try -lr 0.001)")
	fs.IntVar(&cfg.Hidden, "hidden", 256, "width of the MLP's first hidden layer (the second is half)")
	fs.IntVar(&cfg.Epochs, "epochs", 5, "passes over the training set")
	fs.IntVar(&cfg.Batch, "batch", 32, "batch size per rank (the global batch is np × batch)")
	fs.Float64Var(&cfg.LR, "lr", 0.01, "learning rate of one rank; the job's rate is lr × np after warm-up")
	fs.Float64Var(&cfg.Momentum, "momentum", 0.9, "SGD momentum")
	fs.Float64Var(&cfg.WeightDecay, "wd", 5e-5, "weight decay")
	fs.Float64Var(&cfg.Warmup, "warmup", 1, "epochs of linear warm-up from lr to lr × np (Goyal et al.)")
	fs.Func("milestones", "epochs at which the learning rate is multiplied by -gamma, comma separated (default 3,4)", func(v string) error {
		m, err := parseFloats(v)
		cfg.Milestones = m
		return err
	})
	cfg.Milestones = []float64{3, 4}
	fs.BoolVar(&cfg.Adasum, "adasum", false, "combine the ranks' gradients with Adasum instead of averaging them, and keep one rank's learning rate (no scaling by np)")
	fs.BoolVar(&cfg.ShardState, "shard-state", false, "keep only this rank's 1/np part of the optimizer state (momentum, Adam's moments): gradients are reduce-scattered and the updated weights all-gathered (ZeRO stage 1)")
	fs.Float64Var(&cfg.Gamma, "gamma", 0.2, "learning-rate decay factor at each milestone")
	fs.Uint64Var(&cfg.Seed, "seed", 42, "seed of the initial weights and the data order")
	fs.StringVar(&cfg.DataDir, "data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST IDX files (.gz or not)")
	fs.IntVar(&cfg.SynthTrain, "synthetic-train", 12000, "training images of the synthetic set used when -data has none")
	fs.IntVar(&cfg.SynthTest, "synthetic-test", 2000, "test images of the synthetic set")
	fs.IntVar(&cfg.LimitTrain, "limit-train", 0, "train on only the first N training images (0: all; -mode allreduce)")
	fs.IntVar(&cfg.LimitTest, "limit-test", 0, "test on only the first N test images (0: all; -mode allreduce)")
	fs.StringVar(&cfg.CkptDir, "checkpoint-dir", "", "directory for checkpoints (written by rank 0); empty: none")
	fs.IntVar(&cfg.CkptEvery, "checkpoint-every", 0, "steps between checkpoints (0: at the end of each epoch)")
	fs.IntVar(&cfg.Keep, "keep", 3, "checkpoints to keep")
	fs.BoolVar(&cfg.Resume, "resume", false, "resume from the newest valid checkpoint in -checkpoint-dir")
	fs.Int64Var(&cfg.MaxSteps, "max-steps", 0, "stop after this many steps in all (0: train every epoch)")
	fs.IntVar(&cfg.LogEvery, "log-every", 0, "steps between progress lines (0: ten per epoch)")
	fs.IntVar(&cfg.Threads, "threads", 0, "OpenBLAS threads per rank (0: CPUs / ranks on this host)")
	fs.BoolVar(&cfg.Elastic, "elastic", false, "train as an elastic job (start with gorun --min-np N): ranks that fail are dropped and the rest go on from the last commit")
	fs.StringVar(&cfg.Mode, "mode", modeAllReduce, "allreduce (gorun -np N), ps (parameter servers: gorun --ps N -np M) or evaluator (score each checkpoint of -checkpoint-dir as it appears)")
	fs.StringVar(&cfg.PSWire, "ps-wire", "float64", "ps mode: how workers pull values and push gradients: float64 (exact) or float32 (half the bytes; the servers keep float64)")
	fs.Int64Var(&cfg.EvalFinal, "eval-final-step", 0, "evaluator: stop after the checkpoint of this step (0: in ps mode the run's last step, otherwise run until a signal)")
	fs.IntVar(&cfg.EvalMax, "eval-max", 0, "evaluator: stop after this many evaluations (0: no limit)")
	fs.IntVar(&cfg.Staleness, "staleness", 0, "ps mode: 0 trains asynchronously; K > 0 makes a worker more than K pushes ahead of the slowest wait for it")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat-timeout", 0, "ps mode: how long a silent worker (dead, or cut off) keeps its steps before the chief gives them to others (0: 10s)")
	fs.StringVar(&cfg.InitOut, "write-init", "", "write the initial parameters and each of -epochs epochs' data order to this file for examples/mnist/peers/torch_ddp.py, and exit without training")
	fs.IntVar(&cfg.PowerSGD, "powersgd", 0, "send each weight matrix's gradient as rank-r PowerSGD factors with error feedback (0: off; biases go whole)")
	fs.Float64Var(&cfg.TopK, "topk", 0, "send the largest-magnitude fraction (0.01: 1%) of each weight gradient with error feedback, by all-gather (0: off; gradients under 1024 values go whole)")
	fs.BoolVar(&cfg.TopKPlain, "topk-plain", false, "with -topk and -optimizer sgd: leave -momentum to the optimizer instead of applying it before sparsifying (Deep Gradient Compression's momentum correction)")
	fs.IntVar(&cfg.HookWarmup, "compress-warmup", 0, "with -powersgd or -topk: steps that send whole gradients before compression starts")
	fs.IntVar(&cfg.CommitEvery, "commit-every", 10, "steps between commits of the elastic state (-elastic)")
	return fs.String("compression", "none", "gradient wire type: none, fp32, fp16, bf16")
}

// topKMinLen is the length below which -topk sends a gradient whole (the
// biases).
const topKMinLen = 1024

// distributedOptions are the DistributedOptimizer's options that the
// flags choose: the wire type, or a compression hook, or Adasum.
func (cfg *config) distributedOptions() (hvd.DistributedOptions, error) {
	// The backward pass leaves each layer's gradients alone once it has
	// reported them, so they are all-reduced where they are.
	o := hvd.DistributedOptions{Compression: cfg.Compression, InPlace: true, ShardState: cfg.ShardState}
	hooks := 0
	switch {
	case cfg.PowerSGD < 0 || cfg.TopK < 0 || cfg.TopK > 1:
		return o, fmt.Errorf("-powersgd %d must be at least 0 and -topk %v within [0, 1]", cfg.PowerSGD, cfg.TopK)
	case cfg.PowerSGD > 0:
		o.Hook, hooks = &compress.PowerSGD{Rank: cfg.PowerSGD, Seed: cfg.Seed, WarmupSteps: cfg.HookWarmup}, hooks+1
	}
	if cfg.TopK > 0 {
		o.Hook, hooks = &compress.TopK{Fraction: cfg.TopK, MinLen: topKMinLen, WarmupSteps: cfg.HookWarmup, Momentum: cfg.dgcMomentum()}, hooks+1
	}
	if cfg.Adasum {
		o.Op = kernels.Adasum
	}
	if hooks > 0 && (hooks > 1 || cfg.Adasum || cfg.Compression != hvd.NoCompression) {
		return o, errors.New("-powersgd, -topk, -compression and -adasum exclude each other")
	}
	if cfg.ShardState && (hooks > 0 || cfg.Adasum || cfg.Compression != hvd.NoCompression) {
		return o, errors.New("-shard-state takes no -powersgd, -topk, -compression or -adasum")
	}
	return o, nil
}

// dgcMomentum is the momentum that -topk applies itself (TopK.Momentum,
// Deep Gradient Compression's momentum correction) instead of the
// optimizer: SGD's -momentum, unless -topk-plain.
func (cfg *config) dgcMomentum() float64 {
	if cfg.Optimizer != "sgd" || cfg.TopKPlain {
		return 0
	}
	return cfg.Momentum
}

// gradients describes how gradients travel.
func (cfg *config) gradients() string {
	switch {
	case cfg.PowerSGD > 0:
		return fmt.Sprintf("PowerSGD factors of rank %d", cfg.PowerSGD)
	case cfg.TopK > 0:
		return fmt.Sprintf("top %g%%", 100*cfg.TopK)
	}
	return cfg.Compression.String()
}

// threads is the OpenBLAS thread count for a rank with localSize ranks on
// its host.
func (cfg *config) threads(localSize int) int {
	if cfg.Threads > 0 {
		return cfg.Threads
	}
	return max(1, runtime.NumCPU()/max(localSize, 1))
}

// parseFloats reads "3,4.5" (empty: none).
func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
