package main

import (
	"context"
	"reflect"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// testConfig is a small MLP on a small synthetic set (no Fashion-MNIST
// needed).
func testConfig(t *testing.T) config {
	return config{Model: "mlp", Optimizer: "sgd", Hidden: 32, Epochs: 2, Batch: 16, LR: 0.02, Momentum: 0.9, Warmup: 0.5, Gamma: 1,
		Seed: 3, DataDir: t.TempDir(), SynthTrain: 1200, SynthTest: 300, Keep: 2}
}

// trainJob trains cfg on n in-process ranks and returns rank 0's summary.
func trainJob(t *testing.T, n int, cfg config) summary {
	t.Helper()
	sums := make([]summary, n)
	err := hvdtest.Run(n, func(rt *hvd.Runtime) (err error) {
		sums[rt.Rank()], err = train(context.Background(), rt, cfg, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range sums {
		for i, p := range sums[r].Params {
			if !reflect.DeepEqual(p.Value, sums[0].Params[i].Value) {
				t.Fatalf("rank %d's %s differs from rank 0's", r, p.Name)
			}
		}
	}
	return sums[0]
}

func TestTrainsOnSyntheticData(t *testing.T) {
	cfg := testConfig(t)
	cfg.Compression = hvd.BF16Compression
	s := trainJob(t, 2, cfg)
	if acc := s.Epochs[len(s.Epochs)-1].Accuracy; acc < 0.9 {
		t.Errorf("test accuracy %.3f after %d epochs", acc, cfg.Epochs)
	}
}

func TestResumeMatchesUninterrupted(t *testing.T) {
	cfg := testConfig(t)
	cfg.Hidden, cfg.SynthTrain, cfg.SynthTest = 16, 640, 100 // 20 steps per epoch
	cfg.CkptDir, cfg.CkptEvery = t.TempDir(), 6
	cfg.Optimizer, cfg.LR = "adam", 0.002 // its moments must survive the restart too
	whole := trainJob(t, 2, cfg)

	cfg.CkptDir = t.TempDir()
	cfg.MaxSteps = 27 // killed 27 steps in, 3 after the checkpoint of step 24
	if s := trainJob(t, 2, cfg); s.Steps != 27 {
		t.Fatalf("first run stopped after %d steps", s.Steps)
	}
	cfg.MaxSteps, cfg.Resume = 0, true
	resumed := trainJob(t, 2, cfg)
	if resumed.Steps != whole.Steps || len(resumed.Epochs) != 1 {
		t.Fatalf("resumed run ended at step %d with %d epochs, the whole run at %d", resumed.Steps, len(resumed.Epochs), whole.Steps)
	}
	for i, p := range resumed.Params {
		if !reflect.DeepEqual(p.Value, whole.Params[i].Value) {
			t.Errorf("%s differs from the uninterrupted run's", p.Name)
		}
	}
}

// TestShardStateMatchesUnsharded: at 2 ranks, Adam with -shard-state
// trains the same weights as without, bit for bit, also when the sharded
// run is stopped and resumed from its (gathered) checkpoint.
func TestShardStateMatchesUnsharded(t *testing.T) {
	cfg := testConfig(t)
	cfg.Hidden, cfg.SynthTrain, cfg.SynthTest = 16, 640, 100 // 20 steps per epoch
	cfg.Optimizer, cfg.LR = "adam", 0.002
	whole := trainJob(t, 2, cfg)

	cfg.ShardState = true
	cfg.CkptDir, cfg.CkptEvery = t.TempDir(), 6
	cfg.MaxSteps = 27
	if s := trainJob(t, 2, cfg); s.Steps != 27 {
		t.Fatalf("first run stopped after %d steps", s.Steps)
	}
	cfg.MaxSteps, cfg.Resume = 0, true
	resumed := trainJob(t, 2, cfg)
	if resumed.Steps != whole.Steps {
		t.Fatalf("resumed sharded run ended at step %d, the unsharded run at %d", resumed.Steps, whole.Steps)
	}
	for i, p := range resumed.Params {
		if !reflect.DeepEqual(p.Value, whole.Params[i].Value) {
			t.Errorf("%s differs from the unsharded run's", p.Name)
		}
	}
}
