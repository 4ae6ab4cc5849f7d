package main

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkStep times one rank's training step of the default model
// (forward, loss, backward and the SGD update) at batch 32, without the
// all-reduce: the compute that examples/mnist does per step.
func BenchmarkStep(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) { benchStep(b, threads) })
	}
}

func benchStep(b *testing.B, threads int) {
	cfg := config{Optimizer: "sgd", LR: 0.01, Momentum: 0.9, WeightDecay: 5e-5, Batch: 32, Seed: 42}
	train, _, _, err := loadData("/usr/share/datasets/fashion-mnist", 2000, 100, cfg.Seed)
	if err != nil {
		b.Fatal(err)
	}
	m, err := newModel("mlp", 256, cfg.Seed)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := newOptimizer(cfg, m.params())
	if err != nil {
		b.Fatal(err)
	}
	setThreads(threads)
	var x mat
	labels := make([]uint8, cfg.Batch)
	batch := make([]int, cfg.Batch)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		for j := range batch {
			batch[j] = (i*cfg.Batch + j) % train.len()
		}
		train.gather(batch, &x, labels)
		_, _, d := m.loss(m.forward(&x), labels)
		if err := m.backward(d, nil); err != nil {
			b.Fatal(err)
		}
		if err := opt.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
