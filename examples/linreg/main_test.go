package main

import (
	"context"
	"math"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// trainJob trains cfg on n in-process ranks and returns rank 0's result.
func trainJob(t *testing.T, n int, cfg config) result {
	t.Helper()
	res := make([]result, n)
	err := hvdtest.Run(n, func(rt *hvd.Runtime) (err error) {
		res[rt.Rank()], err = train(context.Background(), rt, cfg, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestSameGlobalBatchSameWeights(t *testing.T) {
	cfg := defaultConfig()
	cfg.Samples, cfg.Epochs, cfg.Batch = 1024, 3, 32
	one := trainJob(t, 1, cfg)
	cfg.Batch = 8 // 4 ranks × 8 = the same global batch of 32
	four := trainJob(t, 4, cfg)
	for j := range one.W {
		if math.Abs(one.W[j]-four.W[j]) > 1e-9 {
			t.Errorf("w[%d]: np 1 %.12f, np 4 %.12f", j, one.W[j], four.W[j])
		}
	}
	if math.Abs(one.B-four.B) > 1e-9 {
		t.Errorf("b: np 1 %.12f, np 4 %.12f", one.B, four.B)
	}
	// and the fit is good
	for j := range one.W {
		if math.Abs(one.W[j]-one.TrueW[j]) > 0.05 {
			t.Errorf("w[%d] = %.4f, true %.4f", j, one.W[j], one.TrueW[j])
		}
	}
	if one.Loss > 2*cfg.Noise*cfg.Noise {
		t.Errorf("final mse %v, noise variance %v", one.Loss, cfg.Noise*cfg.Noise)
	}
}

func TestCompressedTrainingConverges(t *testing.T) {
	cfg := defaultConfig()
	cfg.Samples, cfg.Epochs, cfg.Batch, cfg.Compression = 1024, 3, 8, hvd.FP16Compression
	res := trainJob(t, 4, cfg)
	for j := range res.W {
		if math.Abs(res.W[j]-res.TrueW[j]) > 0.05 {
			t.Errorf("fp16: w[%d] = %.4f, true %.4f", j, res.W[j], res.TrueW[j])
		}
	}
}
