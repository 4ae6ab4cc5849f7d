package hvd_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkAllreduceSmall measures what a small blocking hvd.Allreduce
// costs on top of the communicator: 2 in-process ranks over shared memory
// (loopback TCP meshes), a 4 KiB float32 tensor, alternating blocks of
// steps of the bare Comm.Allreduce (one mesh) and of Runtime.Allreduce
// with a context that cannot end (another mesh, the engine's path as a
// training loop's metric or a one-gradient step takes it), so that both
// see the same machine. It reports both per step and hvd/comm; ns/op is
// the two steps together.
//
//	go test ./hvd -run '^$' -bench AllreduceSmall -benchtime 40000x
func BenchmarkAllreduceSmall(b *testing.B) {
	const ranks, size, block = 2, 4 << 10, 200
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	ts, err := tcptransport.LocalMesh(ctx, ranks, bytes.Repeat([]byte{7}, 32))
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	bare := make([]func() error, ranks)
	for r, t := range ts {
		c := collective.NewComm(t, collective.Options{})
		b.Cleanup(func() { c.Close() })
		buf := make([]float32, size/4)
		bare[r] = func() error {
			return collective.Allreduce(context.Background(), c, buf, kernels.Sum, collective.ReduceOptions{})
		}
	}
	viaHvd := make([]func() error, ranks)
	for r, rt := range hvdtest.Start(b, ranks, hvdtest.OverTCP()) {
		t := hvd.NewTensor("metric", make([]float32, size/4))
		viaHvd[r] = func() error {
			return rt.Allreduce(context.Background(), t, kernels.Sum, hvd.ReduceOptions{})
		}
	}
	steps(b, bare, 10)
	steps(b, viaHvd, 10)
	var tBare, tHvd time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(block, b.N-done)
		start := time.Now()
		steps(b, bare, n)
		mid := time.Now()
		steps(b, viaHvd, n)
		tBare, tHvd = tBare+mid.Sub(start), tHvd+time.Since(mid)
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(tBare.Nanoseconds())/float64(b.N), "comm-ns/step")
	b.ReportMetric(float64(tHvd.Nanoseconds())/float64(b.N), "hvd-ns/step")
	b.ReportMetric(float64(tHvd)/float64(tBare), "hvd/comm")
}

// steps runs every rank's step n times, all ranks at once.
func steps(b *testing.B, step []func() error, n int) {
	var wg sync.WaitGroup
	for _, f := range step {
		wg.Go(func() {
			for range n {
				if err := f(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
