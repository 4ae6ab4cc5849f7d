package main

import (
	"math"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	hvdgomlx "github.com/gorovod/gorovod/frameworks/gomlx"
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
		if backend, err = simplego.New("ops_sequential"); err != nil {
			t.Fatal(err)
		}
		backend = hvdgomlx.Trainable(backend)
	})
	return backend
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
