package hvd

import (
	"testing"

	"github.com/gorovod/gorovod/rendezvous"
)

// BenchmarkLogScalars is the cost of one LogScalars call of 4 scalars
// into a buffer with room (the sending goroutine's work is not in it:
// it runs every ScalarInterval, off the training goroutine).
func BenchmarkLogScalars(b *testing.B) {
	p := &publisher{buf: make([]rendezvous.MetricPoint, 0, ScalarBuffer)}
	m := map[string]float64{"loss": 0.5, "accuracy": 0.9, "lr": 0.01, "samples_per_second": 1e4}
	var step int64
	b.ReportAllocs()
	for b.Loop() {
		p.log(step, m)
		step++
		if len(p.buf) > ScalarBuffer-len(m) {
			b.StopTimer()
			p.buf = p.buf[:0]
			b.StartTimer()
		}
	}
	if p.dropped.Load() != 0 {
		b.Fatalf("dropped %d", p.dropped.Load())
	}
}
