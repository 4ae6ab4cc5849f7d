package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

type config struct {
	Samples, Dim  int
	Noise         float64
	Epochs, Batch int
	LR            float64
	Seed          uint64
	Compression   hvd.Compression
}

func defaultConfig() config {
	return config{Samples: 4096, Dim: 8, Noise: 0.1, Epochs: 5, Batch: 16, LR: 0.01, Seed: 1}
}

type result struct {
	W, TrueW []float64
	B, TrueB float64
	Loss     float64 // mean squared error of the last epoch, over all ranks
}

// train fits a linear model on this rank's shard; rank 0 of rt writes
// progress to out (nil: silent).
func train(ctx context.Context, rt *hvd.Runtime, cfg config, out io.Writer) (result, error) {
	data := makeData(cfg.Samples, cfg.Dim, cfg.Noise, cfg.Seed)
	w, b := hvd.NewParam("w", cfg.Dim), hvd.NewParam("b", 1)
	// Each rank draws different initial weights; rank 0's win the broadcast.
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(2+rt.Rank())))
	for j := range w.Value {
		w.Value[j] = 0.1 * rng.NormFloat64()
	}
	sgd, err := hvd.NewSGD([]*hvd.Param{w, b}, hvd.SGDConfig{LR: cfg.LR, Momentum: 0.9})
	if err != nil {
		return result{}, err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Compression: cfg.Compression})
	if err != nil {
		return result{}, err
	}
	if err := hvd.BroadcastParameters(ctx, rt, opt.Params(), 0); err != nil {
		return result{}, err
	}
	var loss float64
	for epoch := range cfg.Epochs {
		if loss, err = trainEpoch(ctx, rt, opt, data, cfg, epoch); err != nil {
			return result{}, err
		}
		if out != nil {
			fmt.Fprintf(out, "epoch %d: mse %.6f\n", epoch+1, loss)
		}
	}
	return result{W: w.Value, B: b.Value[0], TrueW: data.TrueW, TrueB: data.TrueB, Loss: loss}, nil
}

// trainEpoch takes one pass over this rank's shuffled shard and returns
// the epoch's mean squared error averaged over the ranks.
func trainEpoch(ctx context.Context, rt *hvd.Runtime, opt *hvd.DistributedOptimizer, data dataset, cfg config, epoch int) (float64, error) {
	w, b := opt.Params()[0], opt.Params()[1]
	shard := hvd.ShuffledShard(cfg.Samples, rt.Size(), rt.Rank(), cfg.Seed, epoch)
	steps, sum := hvd.StepsPerEpoch(cfg.Samples, rt.Size(), cfg.Batch), 0.0
	for s := range steps {
		batch := hvd.Batch(shard, cfg.Samples/rt.Size(), cfg.Batch, s)
		sum += gradient(w, b, data, batch)
		opt.GradReady("b", "w")
		if err := opt.Step(ctx); err != nil {
			return 0, err
		}
	}
	return hvd.AverageMetric(ctx, rt, "mse", sum/float64(max(steps, 1)))
}

// gradient writes the gradient of the batch's mean squared error into w
// and b and returns that error.
func gradient(w, b *hvd.Param, data dataset, batch []int) float64 {
	clear(w.Grad)
	b.Grad[0] = 0
	mse, scale := 0.0, 1/float64(len(batch))
	for _, i := range batch {
		d := b.Value[0] - data.Y[i]
		for j, x := range data.X[i] {
			d += w.Value[j] * x
		}
		mse += d * d * scale
		for j, x := range data.X[i] {
			w.Grad[j] += 2 * d * x * scale
		}
		b.Grad[0] += 2 * d * scale
	}
	return mse
}
