package tcptransport

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkAllreduce runs the ring all-reduce of the collective package
// over in-process meshes of 2 and 4 ranks: as shipped (shared memory),
// with busy-polling forced off or on, over TCP, and over TCP with the
// host's congestion control on loopback instead of Reno (see
// sameHostCongestion), and over TCP inside TLS (Config.TLS). Besides the time, it reports
// the processor time a call costs (user and system, all ranks together):
// on a shared machine that figure moves far less than the time does.
//
//	go test -run '^$' -bench Allreduce -benchtime 2s ./collective/tcptransport/
func BenchmarkAllreduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{4 << 10, 1 << 20, 64 << 20} {
			for _, v := range []benchVariant{
				{"default", Config{}, tuning{}},
				{"spin=off", Config{}, tuning{spin: -1}},
				{"spin=on", Config{}, tuning{spin: spinBudget}},
				{"tcp", Config{NoSharedMemory: true}, tuning{}},
				{"tcp/cc=host", Config{NoSharedMemory: true}, tuning{congestion: "-"}},
				{"tcp/tls", Config{NoSharedMemory: true, TLS: true}, tuning{}},
				{"tcp/tls/spin=off", Config{NoSharedMemory: true, TLS: true}, tuning{spin: -1}},
			} {
				b.Run(fmt.Sprintf("n%d/%dKiB/%s", n, size>>10, v.name), func(b *testing.B) {
					allreduce(b, n, size, v)
				})
			}
		}
	}
}

func allreduce(b *testing.B, n, size int, v benchVariant) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := localMesh(ctx, n, v.cfg, v.tun)
	if err != nil {
		b.Fatal(err)
	}
	cs := make([]*collective.Comm, n)
	bufs := make([][]float32, n)
	for r := range n {
		cs[r] = collective.NewComm(m[r], collective.Options{})
		defer cs[r].Close()
		bufs[r] = make([]float32, size/4)
	}
	b.SetBytes(int64(size))
	cpu0 := cpuTime()
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
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime returns the processor time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
