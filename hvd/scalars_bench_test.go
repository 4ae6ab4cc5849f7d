package hvd

import (
	"testing"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// BenchmarkLogScalars is the cost of one LogScalars call of 4 scalars
// into a buffer with room (the sending goroutine's work is not in it:
// it runs every ScalarInterval, off the training goroutine).
func BenchmarkLogScalars(b *testing.B) {
	p := &publisher{buf: new(rendezvous.Batch), epoch: time.Now()}
	m := map[string]float64{"loss": 0.5, "accuracy": 0.9, "lr": 0.01, "samples_per_second": 1e4}
	var step int64
	b.ReportAllocs()
	for b.Loop() {
		p.log(step, m)
		step++
		if p.buf.Len() > ScalarBuffer-len(m) {
			b.StopTimer()
			p.buf.Reset()
			b.StartTimer()
		}
	}
	if p.dropped.Load() != 0 {
		b.Fatalf("dropped %d", p.dropped.Load())
	}
}

// TestCommShare: the communication share is the engine's busy time over
// the time between the two readings of its statistics, never above 1
// (a batch counted whole in the span where it ended) nor below 0.
func TestCommShare(t *testing.T) {
	for _, c := range []struct {
		busy, span time.Duration
		want       float64
		ok         bool
	}{
		{250 * time.Millisecond, time.Second, 0.25, true},
		{3 * time.Second, time.Second, 1, true},
		{-time.Second, time.Second, 0, true},
		{time.Second, 0, 0, false},
	} {
		if got, ok := commShare(c.busy, c.span); got != c.want || ok != c.ok {
			t.Errorf("commShare(%v, %v) = %v, %v; want %v, %v", c.busy, c.span, got, ok, c.want, c.ok)
		}
	}
	// Steps logged 10 ms apart, statistics read 1 s apart with 0.5 s busy:
	// the share is 0.5 (the steps' 10 ms would have made it 50).
	t0 := time.Unix(1_700_000_000, 0)
	p := &publisher{r: &Runtime{}}
	p.prev = sample{at: t0, step: 1, read: t0}
	cur := sample{at: t0.Add(10 * time.Millisecond), step: 2, read: t0.Add(time.Second)}
	cur.engine.Negotiation = 500 * time.Millisecond
	var share []float64
	for _, pt := range p.runtimeSeries(nil, cur) {
		if pt.Name == "hvd/comm_share" {
			share = append(share, pt.Value)
		}
	}
	if len(share) != 1 || share[0] != 0.5 {
		t.Errorf("hvd/comm_share %v, want [0.5]", share)
	}
}
