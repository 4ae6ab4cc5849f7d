package engine

import (
	"fmt"
	"testing"
)

// BenchmarkNegotiatorStep measures the negotiation's own work, with no
// transport: one step of 256 all-reduces on 4 negotiators in lock step
// (every rank's begin, exchanged, gathered and decide, plus the test's Min
// and concatenation), from the response cache or negotiated in full.
func BenchmarkNegotiatorStep(b *testing.B) {
	const ranks, tensors = 4, 256
	reqs := make([]Request, tensors)
	for i := range reqs {
		reqs[i] = ar(fmt.Sprint("grad/", i), 4096)
	}
	for _, cache := range []int{1024, 0} {
		b.Run(map[bool]string{true: "cached", false: "uncached"}[cache > 0], func(b *testing.B) {
			l := newLockstep(b, ranks, tuning{fusion: 64 << 20, cache: cache})
			b.ReportAllocs()
			for b.Loop() {
				l.submitAll(reqs...)
				if cs := l.cycle(); len(cs[0].tasks) != tensors {
					b.Fatalf("%d tasks, want %d", len(cs[0].tasks), tensors)
				}
			}
		})
	}
}
