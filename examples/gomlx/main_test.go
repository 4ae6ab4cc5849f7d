package main

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

var (
	backendOnce sync.Once
	backend     backends.Backend
)

func theBackend(t *testing.T) backends.Backend {
	backendOnce.Do(func() {
		var err error
		if backend, err = simplego.New(""); err != nil {
			t.Fatal(err)
		}
	})
	return backend
}

// The gathered 3×3 convolution (patches3x3 times a kernel) equals GoMLX's
// own graph.Convolve with "same" padding.
func TestConvMatchesGoMLXConvolve(t *testing.T) {
	const b, h, w, c, f = 2, 5, 4, 3, 2
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, b*h*w*c)
	for i := range xs {
		xs[i] = r.Float32()*2 - 1
	}
	ks := make([]float32, 3*3*c*f) // [3, 3, c, f]: GoMLX's kernel layout
	for i := range ks {
		ks[i] = r.Float32()*2 - 1
	}
	e, err := graph.NewExec(theBackend(t), func(x, k *graph.Node) (*graph.Node, *graph.Node) {
		want := graph.Convolve(x, k).Strides(1).PadSame().Done()
		got := graph.MatMul(patches3x3(x), graph.Reshape(k, 9*c, f))
		return want, got
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Exec(tensors.FromFlatDataAndDimensions(xs, b, h, w, c), tensors.FromFlatDataAndDimensions(ks, 3, 3, c, f))
	if err != nil {
		t.Fatal(err)
	}
	want, got := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
	if len(want) != b*h*w*f || len(got) != len(want) {
		t.Fatalf("%d and %d outputs, want %d", len(want), len(got), b*h*w*f)
	}
	for i := range want {
		if math.Abs(float64(want[i]-got[i])) > 1e-5 {
			t.Fatalf("output %d: gathered convolution %v, graph.Convolve %v", i, got[i], want[i])
		}
	}
}

// On a reduced set (the first 1280 Fashion-MNIST training images, or
// synthetic ones where the files are missing; 1000 test images), one epoch
// at np 4 reaches the np 1 test accuracy within 1 point, well above chance.
func TestAccuracyNp4MatchesNp1(t *testing.T) {
	cfg := config{data: "/usr/share/datasets/fashion-mnist", trainN: 1280, testN: 1000, epochs: 1, batch: 64, lr: 0.002, seed: 1}
	tr, te, source, err := load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc := map[int]float64{}
	for _, np := range []int{1, 4} {
		accs := make([]float64, np)
		rts := hvdtest.Start(t, np)
		hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
			res, err := run(rt, theBackend(t), cfg, tr, te)
			accs[rt.Rank()] = res.accuracy
			return err
		})
		for r, a := range accs {
			if a != accs[0] {
				t.Fatalf("np %d: rank %d reports accuracy %v, rank 0 %v", np, r, a, accs[0])
			}
		}
		acc[np] = accs[0]
	}
	t.Logf("%s: test accuracy %.2f%% at np 1, %.2f%% at np 4", source, 100*acc[1], 100*acc[4])
	if acc[1] < 0.5 {
		t.Fatalf("np 1 reached %.2f%% test accuracy, want at least 50%% (chance: 10%%)", 100*acc[1])
	}
	if d := math.Abs(acc[4] - acc[1]); d > 0.01 {
		t.Fatalf("np 4 reached %.2f%%, np 1 %.2f%%: more than 1 point apart", 100*acc[4], 100*acc[1])
	}
}
