package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// report runs the baseline and the distributed benchmark and prints them
// (rank 0).
func report(ctx context.Context, rt *hvd.Runtime, b *bench, specs []tensorSpec) error {
	n := totalSize(specs)
	dt := b.params[0].DType()
	wire := b.cfg.Compression.WireDTypeFor(dt)
	how := "through a copy"
	switch {
	case b.cfg.ShardState:
		how = "reduce-scattered (the updated values all-gathered)"
	case b.cfg.InPlace && wire == dt:
		how = "in place"
	}
	if h := b.cfg.hookName(); h != "" {
		b.printf("Model: %s, %d tensors, %d %v parameters; gradients travel as %s (hvd/compress)\n", b.cfg.Model, len(specs), n, dt, h)
	} else {
		b.printf("Model: %s, %d tensors, %d %v parameters; gradients travel as %v (%.1f MB per step), all-reduced %s\n",
			b.cfg.Model, len(specs), n, dt, wire, float64(n*wire.Size())/1e6, how)
	}
	b.printf("Batch size: %d per rank; compute %v\n", b.cfg.Batch, b.compute)
	b.printf("Number of ranks: %d\n", rt.Size())
	base, err := baseline(ctx, rt, b)
	if err != nil {
		return err
	}
	b.printf("Running benchmark on %d ranks...\n", rt.Size())
	rates, err := b.run(ctx, rt)
	if err != nil {
		return err
	}
	busy, wait := b.split()
	b.printf("Rank 0 per step: %v computing and reporting gradients, %v more waiting for the all-reduces\n",
		busy.Round(time.Millisecond), wait.Round(time.Millisecond))
	mean, conf := meanConf(rates)
	avg, err := hvd.AverageMetrics(ctx, rt, map[string]float64{"mean": mean, "conf": conf})
	if err != nil {
		return err
	}
	size := float64(rt.Size())
	b.printf("Img/sec per rank: %.1f +-%.1f\n", avg["mean"], avg["conf"])
	b.printf("Total img/sec on %d rank(s): %.1f +-%.1f\n", rt.Size(), size*avg["mean"], size*avg["conf"])
	if base > 0 {
		b.printf("Scaling efficiency at np %d: %.1f%% (%.1f img/sec of %d × %.1f)\n",
			rt.Size(), 100*avg["mean"]/base, size*avg["mean"], rt.Size(), base)
	}
	return nil
}

// baseline measures samples/s per rank at np 1, on a job of one rank of
// its own, and returns it on every rank (0 with -baseline none).
func baseline(ctx context.Context, rt *hvd.Runtime, b *bench) (float64, error) {
	mode := b.cfg.Baseline
	switch {
	case mode == "none":
		return 0, nil
	case mode != "concurrent" && mode != "rank0":
		return 0, fmt.Errorf("-baseline %q: want concurrent, rank0 or none", mode)
	}
	b.printf("Running the np 1 baseline (%s)...\n", map[string]string{
		"concurrent": "every rank alone, all at the same time", "rank0": "rank 0 alone"}[mode])
	var mean float64
	if mode == "concurrent" || rt.Rank() == 0 {
		one, err := hvd.NewRuntime(ctx, hvd.Config{})
		if err != nil {
			return 0, err
		}
		rates, err := b.run(ctx, one)
		one.Shutdown()
		if err != nil {
			return 0, err
		}
		mean, _ = meanConf(rates)
		busy, wait := b.split()
		b.printf("Rank 0 alone per step: %v computing and reporting gradients, %v more in Step\n",
			busy.Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	if mode == "rank0" {
		return mean, hvd.BroadcastObject(ctx, rt, &mean, 0)
	}
	base, err := hvd.AverageMetric(ctx, rt, "baseline", mean)
	b.printf("Baseline img/sec per rank at np 1: %.1f\n", base)
	return base, err
}
