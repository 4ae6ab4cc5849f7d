package main

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

func TestResNet50Layout(t *testing.T) {
	ts := resnet50()
	if len(ts) != 161 || totalSize(ts) != 25_557_032 {
		t.Errorf("resnet50: %d tensors, %d parameters; want 161 and 25557032", len(ts), totalSize(ts))
	}
	seen := map[string]bool{}
	for _, s := range ts {
		if seen[s.name] || s.size <= 0 {
			t.Errorf("tensor %q (%d) repeated or empty", s.name, s.size)
		}
		seen[s.name] = true
	}
}

func TestUniformLayout(t *testing.T) {
	ts, err := modelSpec("uniform", 1003, 10)
	if err != nil || len(ts) != 10 || totalSize(ts) != 1003 || ts[0].size != 101 || ts[9].size != 100 {
		t.Errorf("uniform: %v, %v", ts, err)
	}
	for _, bad := range [][3]any{{"uniform", 0, 1}, {"uniform", 5, 0}, {"vgg", 1, 1}} {
		if _, err := modelSpec(bad[0].(string), bad[1].(int), bad[2].(int)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil || cfg.Float64 || cfg.Compression != hvd.NoCompression || !cfg.InPlace {
		t.Errorf("defaults: %+v, %v; want float32 parameters sent as they are, in place", cfg, err)
	}
	if cfg, err := parseFlags([]string{"-in-place=false"}); err != nil || cfg.InPlace {
		t.Errorf("-in-place=false: %+v, %v", cfg, err)
	}
	if cfg, err := parseFlags([]string{"-dtype", "float64", "-compression", "fp32"}); err != nil || !cfg.Float64 || cfg.Compression != hvd.FP32Compression {
		t.Errorf("-dtype float64 -compression fp32: %+v, %v", cfg, err)
	}
	if _, err := parseFlags([]string{"-dtype", "int8"}); err == nil {
		t.Error("-dtype int8 accepted")
	}
	if cfg, err := parseFlags([]string{"-powersgd", "4"}); err != nil || cfg.PowerSGD != 4 {
		t.Errorf("-powersgd 4: %+v, %v", cfg, err)
	} else if o, _ := cfg.options(); o.Hook == nil {
		t.Error("-powersgd 4 sets no hook")
	}
	if cfg, err := parseFlags([]string{"-update", "-optimizer", "adam", "-shard-state"}); err != nil || !cfg.ShardState || cfg.Optimizer != "adam" {
		t.Errorf("-update -optimizer adam -shard-state: %+v, %v", cfg, err)
	} else if o, _ := cfg.options(); !o.ShardState {
		t.Error("-shard-state does not shard")
	}
	for _, bad := range [][]string{{"-topk", "0.01", "-compression", "fp16"}, {"-topk", "0.01", "-powersgd", "2"}, {"-topk", "2"}, {"-powersgd", "-1"},
		{"-shard-state"}, {"-update", "-optimizer", "lamb"}, {"-update", "-shard-state", "-elastic"}, {"-update", "-shard-state", "-powersgd", "2"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestMeanConf(t *testing.T) {
	m, c := meanConf([]float64{1, 3})
	if m != 2 || math.Abs(c-1.96) > 1e-12 {
		t.Errorf("meanConf = %v ± %v", m, c)
	}
	if m, c := meanConf(nil); m != 0 || c != 0 {
		t.Errorf("empty: %v ± %v", m, c)
	}
}

// TestBenchmarkRuns runs the whole benchmark (baseline, then distributed)
// on two in-process ranks with a tiny model and compute step.
func TestBenchmarkRuns(t *testing.T) {
	for _, c := range [][3]string{{"sleep", "float32", "true"}, {"gemm", "float64", "false"}} {
		compute := c[0]
		cfg, err := parseFlags([]string{"-model", "uniform", "-params", "1000", "-tensors", "7", "-compute", compute,
			"-step-time", "3ms", "-gemm-n", "8", "-warmup", "1", "-iters", "2", "-batches-per-iter", "2", "-update", "-dtype", c[1], "-in-place=" + c[2]})
		if err != nil {
			t.Fatal(err)
		}
		specs, _ := modelSpec(cfg.Model, cfg.Params, cfg.Tensors)
		err = hvdtest.Run(2, func(rt *hvd.Runtime) error {
			b, err := newBench(cfg, specs, 1) // rank 1: silent
			if err != nil {
				return err
			}
			return report(context.Background(), rt, b, specs)
		})
		if err != nil {
			t.Fatalf("%s: %v", compute, err)
		}
	}
}

func TestSleepComputeTakesTheStepTime(t *testing.T) {
	c := &sleepCompute{step: 30 * time.Millisecond}
	start := time.Now()
	c.forward()
	for k := range 5 {
		c.backward(k, 5)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("a 30ms step took %v", d)
	}
}

// TestDgemm: the build's matrix product (OpenBLAS, or gonum without cgo)
// is the product.
func TestDgemm(t *testing.T) {
	const n = 5
	a, b, c := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i], c[i] = float64(i%7)-3, float64(i%5)+1, 99
	}
	dgemm(n, a, b, c)
	for i := range n {
		for j := range n {
			want := 0.0
			for p := range n {
				want += a[i*n+p] * b[p*n+j]
			}
			if c[i*n+j] != want {
				t.Fatalf("c[%d][%d] = %v, want %v", i, j, c[i*n+j], want)
			}
		}
	}
}
