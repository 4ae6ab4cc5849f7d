package main

import (
	"context"
	"io"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// ciConfig is the reduced run of CI: the first 2048 training and 1000 test
// images of Fashion-MNIST (a synthetic set of that size without it), two
// epochs.
func ciConfig() config {
	return config{DataDir: "/usr/share/datasets/fashion-mnist", Epochs: 2, Batch: 64, EvalBatch: 250, LR: 0.002, Solver: "adam",
		Arch: arch{F1: 8, F2: 16, Hidden: 64}, TrainLimit: 2048, TestLimit: 1000, SynthTrain: 2048, SynthTest: 1000, Seed: 1}
}

// trainJob trains cfg on n in-process ranks, checks that every rank ends
// with rank 0's weights, and returns rank 0's summary.
func trainJob(t *testing.T, n int, cfg config) summary {
	t.Helper()
	sums := make([]summary, n)
	err := hvdtest.Run(n, func(rt *hvd.Runtime) (err error) {
		out := io.Discard
		if testing.Verbose() {
			out = os.Stdout
		}
		sums[rt.Rank()], err = train(context.Background(), rt, cfg, out)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range sums {
		for i, w := range sums[r].Weights {
			if !slices.Equal(w, sums[0].Weights[i]) {
				t.Fatalf("rank %d's %s differs from rank 0's", r, weightNames[i])
			}
		}
	}
	return sums[0]
}

// Four ranks reach the test accuracy of one after the same epochs, within
// 1 point (the criterion). The global batches are the same at
// every process count (hvd.ShuffledShard strides through each epoch's
// order), so the runs differ only in rounding: the order in which the
// ranks' gradients are summed. Both learn: above 70% (Fashion-MNIST) or 90%
// (synthetic).
func TestFourRanksMatchOne(t *testing.T) {
	cfg := ciConfig()
	one, four := trainJob(t, 1, cfg), trainJob(t, 4, cfg)
	a1, a4 := one.Epochs[len(one.Epochs)-1].Accuracy, four.Epochs[len(four.Epochs)-1].Accuracy
	var d, m float64
	for i, w := range one.Weights {
		for j, v := range w {
			d = math.Max(d, math.Abs(float64(four.Weights[i][j]-v)))
			m = math.Max(m, math.Abs(float64(v)))
		}
	}
	t.Logf("%s; after %d epochs: test accuracy np 1 %.4f, np 4 %.4f; weights max|Δ|/max|w| %.2g", one.Note, cfg.Epochs, a1, a4, d/m)
	floor := 0.70
	if _, err := os.Stat(cfg.DataDir + "/train-images-idx3-ubyte.gz"); err != nil {
		floor = 0.90
	}
	for _, a := range []float64{a1, a4} {
		if a < floor {
			t.Errorf("test accuracy %.4f, want at least %.2f", a, floor)
		}
	}
	if math.Abs(a1-a4) > 0.01 {
		t.Errorf("np 4 accuracy %.4f is more than 1 point from np 1's %.4f", a4, a1)
	}
}

// Three ranks (a global batch of 63) train and agree, and the synthetic
// fallback works where Fashion-MNIST is missing.
func TestThreeRanksSynthetic(t *testing.T) {
	cfg := ciConfig()
	cfg.DataDir, cfg.Batch, cfg.SynthTrain, cfg.SynthTest, cfg.Epochs = t.TempDir(), 63, 1260, 300, 2
	s := trainJob(t, 3, cfg)
	if a := s.Epochs[len(s.Epochs)-1].Accuracy; a < 0.9 {
		t.Errorf("%s: test accuracy %.4f, want at least 0.90", s.Note, a)
	}
}
