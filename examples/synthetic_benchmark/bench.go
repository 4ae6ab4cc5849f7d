package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// bench is one rank's benchmark: the model's parameters, the compute
// stand-in, and where rank 0 prints.
type bench struct {
	cfg     config
	params  []*hvd.Param
	compute compute
	out     io.Writer // nil on ranks other than 0, and in the baseline
	// time spent in the timed steps of the last run: computing and
	// reporting gradients, and waiting in Step for the all-reduces
	busy, wait time.Duration
	steps      int
}

// run trains on rt for the warm-up and timed steps and returns the
// samples per second of each timed iteration on this rank.
func (b *bench) run(ctx context.Context, rt *hvd.Runtime) ([]float64, error) {
	opts, err := b.cfg.options()
	if err != nil {
		return nil, err
	}
	opt, err := hvd.NewDistributedOptimizer(b.optimizer(), rt, opts)
	if err != nil {
		return nil, err
	}
	if b.cfg.Update {
		b.printf("Optimizer state: %d bytes on rank 0 (%s%s)\n", opt.StateBytes(), b.cfg.Optimizer, map[bool]string{true: ", sharded"}[b.cfg.ShardState])
	}
	for range b.cfg.Warmup {
		if err := b.step(ctx, opt); err != nil {
			return nil, err
		}
	}
	rates := make([]float64, 0, b.cfg.Iters)
	b.busy, b.wait, b.steps = 0, 0, 0
	for it := range b.cfg.Iters {
		start := time.Now()
		for range b.cfg.BatchesPerIter {
			if err := b.step(ctx, opt); err != nil {
				return nil, err
			}
		}
		b.steps += b.cfg.BatchesPerIter
		rate := float64(b.cfg.Batch*b.cfg.BatchesPerIter) / time.Since(start).Seconds()
		rates = append(rates, rate)
		b.printf("Iter #%d: %.1f img/sec per rank\n", it, rate)
	}
	return rates, nil
}

// step is one training step: forward, then backward from the last tensor
// to the first, reporting each gradient as it is computed, then the
// update (which waits for the last all-reduces).
func (b *bench) step(ctx context.Context, opt *hvd.DistributedOptimizer) error {
	start := time.Now()
	b.compute.forward()
	n := len(b.params)
	for k := range n {
		b.compute.backward(k, n)
		if err := opt.GradReady(b.params[n-1-k].Name); err != nil {
			return err
		}
	}
	mid := time.Now()
	err := opt.Step(ctx)
	b.busy += mid.Sub(start)
	b.wait += time.Since(mid)
	return err
}

// split is the mean time per timed step spent computing and reporting
// gradients, and waiting for the all-reduces to finish.
func (b *bench) split() (busy, wait time.Duration) {
	if b.steps == 0 {
		return 0, 0
	}
	return b.busy / time.Duration(b.steps), b.wait / time.Duration(b.steps)
}

// optimizer is SGD with -update, else one that applies nothing, so that
// a step's time is compute and communication only.
func (b *bench) optimizer() hvd.Optimizer {
	switch {
	case b.cfg.Update && b.cfg.Optimizer == "adam":
		adam, _ := hvd.NewAdam(b.params, hvd.AdamConfig{LR: 1e-9})
		return adam
	case b.cfg.Update:
		sgd, _ := hvd.NewSGD(b.params, hvd.SGDConfig{LR: 1e-9})
		return sgd
	}
	return frozen{b.params}
}

func (b *bench) printf(format string, args ...any) {
	if b.out != nil {
		fmt.Fprintf(b.out, format, args...)
	}
}

// meanConf is the mean of xs and 1.96 standard deviations (Horovod's
// "img/sec ± conf").
func meanConf(xs []float64) (mean, conf float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, 1.96 * math.Sqrt(v/float64(len(xs)))
}

// frozen is an optimizer that leaves its parameters alone.
type frozen struct{ ps []*hvd.Param }

func (f frozen) Params() []*hvd.Param                { return f.ps }
func (f frozen) Step(context.Context) error          { return nil }
func (f frozen) ZeroGrad()                           {}
func (f frozen) LR() float64                         { return 0 }
func (f frozen) SetLR(float64)                       {}
func (f frozen) State() hvd.OptimizerState           { return hvd.OptimizerState{} }
func (f frozen) SetState(s hvd.OptimizerState) error { return nil }
