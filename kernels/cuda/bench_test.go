//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// BenchmarkReduceVsCopy times, with events on one stream and in the same
// run, a device-to-device copy of N bytes and the float32 sum Reduce of N
// bytes into N bytes. Bandwidth counts the bytes moved through device
// memory: 2N for the copy (read N, write N) and 3N for the reduce (read dst
// and src, write dst). It reports both in GB/s (10^9 bytes per second) and
// their ratio reduce/copy, which the kernels aim to keep at 0.8 or more.
func BenchmarkReduceVsCopy(b *testing.B) {
	for _, mib := range []int{64, 256} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) { benchReduceVsCopy(b, mib<<20) })
	}
}

func benchReduceVsCopy(b *testing.B, bytes int) {
	s := newStream(b)
	dst, src, tmp := alloc(b, bytes), alloc(b, bytes), alloc(b, bytes)
	n := bytes / 4
	for _, p := range []uintptr{dst.Ptr, src.Ptr, tmp.Ptr} {
		if err := s.Memset(p, bytes); err != nil { // zeros: no NaN or subnormal slows anything
			b.Fatal(err)
		}
	}
	e0, e1, e2 := newEvent(b), newEvent(b), newEvent(b)
	var copyTime, reduceTime time.Duration
	round := func() {
		steps := []func() error{
			func() error { return s.Record(e0) },
			func() error { return s.CopyDtoD(tmp.Ptr, src.Ptr, bytes) },
			func() error { return s.Record(e1) },
			func() error { return gpu.Reduce(s, kernels.F32, kernels.Sum, dst.Ptr, src.Ptr, n) },
			func() error { return s.Record(e2) },
			func() error { return e2.Synchronize() },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				b.Fatal(err)
			}
		}
		c, err := e1.Elapsed(e0)
		if err != nil {
			b.Fatal(err)
		}
		r, err := e2.Elapsed(e1)
		if err != nil {
			b.Fatal(err)
		}
		copyTime += c
		reduceTime += r
	}
	for range 3 { // warm up: JIT, clocks, TLBs
		round()
	}
	copyTime, reduceTime = 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round()
	}
	b.StopTimer()
	copyBW := 2 * float64(bytes) * float64(b.N) / copyTime.Seconds() / 1e9
	reduceBW := 3 * float64(bytes) * float64(b.N) / reduceTime.Seconds() / 1e9
	b.ReportMetric(copyBW, "copy_GB/s")
	b.ReportMetric(reduceBW, "reduce_GB/s")
	b.ReportMetric(reduceBW/copyBW, "reduce/copy")
	b.ReportMetric(float64(copyTime.Microseconds())/float64(b.N), "copy_us")
	b.ReportMetric(float64(reduceTime.Microseconds())/float64(b.N), "reduce_us")
}

// BenchmarkReduce reports the bandwidth (3N bytes per N-byte reduce) of
// every dtype's Sum on 64 MiB, aligned and with src one element off (the
// scalar path), for comparison with BenchmarkReduceVsCopy.
func BenchmarkReduce(b *testing.B) {
	const bytes = 64 << 20
	for _, dt := range kernels.DTypes {
		for _, off := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/off=%d", dt, off), func(b *testing.B) {
				s := newStream(b)
				dst, src := alloc(b, bytes+16), alloc(b, bytes+16)
				for _, p := range []uintptr{dst.Ptr, src.Ptr} {
					if err := s.Memset(p, bytes+16); err != nil {
						b.Fatal(err)
					}
				}
				n := bytes/dt.Size() - 1
				sp := src.Ptr + uintptr(off*dt.Size())
				start, end := newEvent(b), newEvent(b)
				var total time.Duration
				for i := -3; i < b.N; i++ {
					if err := s.Record(start); err != nil {
						b.Fatal(err)
					}
					if err := gpu.Reduce(s, dt, kernels.Sum, dst.Ptr, sp, n); err != nil {
						b.Fatal(err)
					}
					if err := s.Record(end); err != nil {
						b.Fatal(err)
					}
					if err := end.Synchronize(); err != nil {
						b.Fatal(err)
					}
					d, err := end.Elapsed(start)
					if err != nil {
						b.Fatal(err)
					}
					if i >= 0 {
						total += d
					}
				}
				b.ReportMetric(3*float64(n*dt.Size())*float64(b.N)/total.Seconds()/1e9, "GB/s")
			})
		}
	}
}
