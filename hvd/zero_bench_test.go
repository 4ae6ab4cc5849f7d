package hvd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// BenchmarkShardStateStep measures a step of SGD with momentum over 8 M
// float32 parameters in 32 tensors, unsharded (gradients all-reduced in
// place) and sharded (reduce-scattered, values all-gathered), on 2
// in-process ranks over shared memory (loopback TCP meshes), alternating
// the two every step so that both see the same machine. Every gradient
// is reported at once (no backward pass to overlap). It reports the
// median step of each.
//
//	go test ./hvd -run '^$' -bench ShardStateStep -benchtime 30x
func BenchmarkShardStateStep(b *testing.B) {
	const ranks, tensors, per = 2, 32, 1 << 18
	rts := hvdtest.Start(b, ranks, hvdtest.OverTCP())
	opts := make([][2]*hvd.DistributedOptimizer, ranks)
	for r, rt := range rts {
		for i, shard := range []bool{false, true} {
			ps := make([]*hvd.Param, tensors)
			for k := range ps {
				ps[k] = hvd.NewParam32(fmt.Sprintf("t%d", k), per)
			}
			sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1e-9, Momentum: 0.9})
			if err != nil {
				b.Fatal(err)
			}
			if opts[r][i], err = hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{InPlace: true, ShardState: shard}); err != nil {
				b.Fatal(err)
			}
		}
	}
	step := func(i int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		errs := make([]error, ranks)
		for r := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = opts[r][i].Step(context.Background())
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	step(0)
	step(1)
	var times [2][]time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range 2 {
			times[i] = append(times[i], step(i))
		}
	}
	b.StopTimer()
	for i, name := range []string{"unsharded", "sharded"} {
		b.ReportMetric(float64(median(times[i]).Microseconds())/1e3, name+"-ms/step")
	}
}
