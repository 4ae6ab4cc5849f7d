package collective_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkScale measures jobs of 256 and 1,024 in-process ranks over the
// memory transport (default options, every rank its own goroutine on
// however few CPUs the machine has):
//
//	n=N/form              create the mesh and one Comm per rank: ms/form,
//	                      and per rank the heap it keeps (B/rank, after a
//	                      GC) and allocates (alloc-B/rank)
//	n=N/allreduce=SIZE    float32 sum of SIZE bytes on every rank of one
//	                      mesh: ns/op, busbw-GB/s (algbw × 2(n−1)/n, as in
//	                      nccl-tests), first-ms (the first operation of
//	                      that size, which builds its plan), B/rank (the
//	                      whole job's live heap per rank: mesh, Comm,
//	                      plans, scratch and the SIZE buffer) and
//	                      alloc-B/rank/op (garbage per rank and operation:
//	                      the memory transport copies every message)
//
// The large all-reduce is 4 MiB at both sizes: at n=1,024 its buffers are
// 4 GiB, which with the mesh, the scratch and the messages in flight fits
// a 24 GiB machine. Each operation waits for all n goroutines, so on few
// CPUs the time is the CPU work of all ranks, not a network's latency:
// compare sizes and commits on one machine, never with real hosts.
//
//	go test ./collective -run '^$' -bench Scale -benchtime 3x
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{256, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchScale(b, n) })
	}
}

func benchScale(b *testing.B, n int) {
	b.Run("form", func(b *testing.B) { benchScaleForm(b, n) })
	base := liveHeap()
	cs := formScale(n)
	defer closeScale(cs)
	for _, size := range []int{4 << 10, 4 << 20} {
		j := &scaleJob{cs: cs, size: size, base: base}
		b.Run("allreduce="+sizeName(size), j.bench)
		j.bufs = nil // before the next size allocates its own
	}
}

// formScale forms a memory mesh of n ranks and a default Comm on each.
func formScale(n int) []*collective.Comm {
	cs := make([]*collective.Comm, n)
	for r, t := range memtransport.NewNetwork(n).Transports() {
		cs[r] = collective.NewComm(t, collective.Options{})
	}
	return cs
}

func closeScale(cs []*collective.Comm) {
	for _, c := range cs {
		c.Close()
	}
}

func benchScaleForm(b *testing.B, n int) {
	var formed time.Duration
	var kept int64
	var allocated uint64
	for range b.N {
		b.StopTimer()
		base := liveHeap()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		cs := formScale(n)
		formed += time.Since(start)
		b.StopTimer()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		allocated += after.TotalAlloc - before.TotalAlloc
		kept += liveHeap() - base // may be negative when earlier garbage went
		runtime.KeepAlive(cs)
		closeScale(cs)
		b.StartTimer()
	}
	per := float64(b.N * n)
	b.ReportMetric(formed.Seconds()*1e3/float64(b.N), "ms/form")
	b.ReportMetric(float64(kept)/per, "B/rank")
	b.ReportMetric(float64(allocated)/per, "alloc-B/rank")
}

// scaleJob is one all-reduce size on a shared mesh. Its buffers and the
// time of its first operation outlive the benchmark function, which the
// testing package calls more than once (b.N = 1 first).
type scaleJob struct {
	cs    []*collective.Comm
	size  int
	base  int64 // live heap before the mesh was formed
	bufs  [][]float32
	first time.Duration
}

func (j *scaleJob) bench(b *testing.B) {
	n := len(j.cs)
	if j.bufs == nil {
		j.bufs = make([][]float32, n)
		for r := range j.bufs {
			j.bufs[r] = make([]float32, j.size/4)
			for i := range j.bufs[r] {
				j.bufs[r][i] = 1
			}
		}
		start := time.Now()
		if err := j.run(1); err != nil {
			b.Fatal(err)
		}
		j.first = time.Since(start)
		if got := j.bufs[0][len(j.bufs[0])-1]; got != float32(n) {
			b.Fatalf("rank 0 holds %v after the first all-reduce, want %d", got, n)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	err := j.run(b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(j.size)/perOp*2*float64(n-1)/float64(n)/1e9, "busbw-GB/s")
	b.ReportMetric(float64(j.first.Microseconds())/1e3, "first-ms")
	b.ReportMetric(float64(liveHeap()-j.base)/float64(n), "B/rank")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*n), "alloc-B/rank/op")
}

// run all-reduces every rank's buffer iters times, all ranks at once.
func (j *scaleJob) run(iters int) error {
	errs := make([]error, len(j.cs))
	var wg sync.WaitGroup
	for r, c := range j.cs {
		wg.Go(func() {
			for range iters {
				if err := collective.Allreduce(context.Background(), c, j.bufs[r], kernels.Sum, collective.ReduceOptions{}); err != nil {
					errs[r] = fmt.Errorf("rank %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func sizeName(size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("%dMiB", size>>20)
	}
	return fmt.Sprintf("%dKiB", size>>10)
}
