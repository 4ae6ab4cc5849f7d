package collective_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkAllreduceTCP: float32 sum over loopback TCP (shared memory
// off, as between hosts) with n in-process ranks. Throughput is reported
// as bus bandwidth's numerator (bytes per rank); multiply by 2(n-1)/n for
// busbw.
func BenchmarkAllreduceTCP(b *testing.B) { benchAllreduce(b, meshtest.TCP) }

// BenchmarkAllreduceShm: the same over shared memory, as between ranks on
// one host.
func BenchmarkAllreduceShm(b *testing.B) { benchAllreduce(b, meshtest.Shm) }

func benchAllreduce(b *testing.B, mk meshtest.Func) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{4 << 10, 1 << 20, 64 << 20} {
			b.Run(fmt.Sprintf("n%d/%dKiB", n, size>>10), func(b *testing.B) {
				ts := mk(b, n)
				cs := make([]*collective.Comm, n)
				bufs := make([][]float32, n)
				for r := range n {
					cs[r] = collective.NewComm(ts[r], collective.Options{})
					defer cs[r].Close()
					bufs[r] = make([]float32, size/4)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				var wg sync.WaitGroup
				for r := range n {
					wg.Go(func() {
						for range b.N {
							if err := collective.Allreduce(context.Background(), cs[r], bufs[r], kernels.Sum, collective.ReduceOptions{}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}
