package hvd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// BenchmarkElasticCommit measures ElasticState.Commit per step for the
// mnist example's model (235,146 float64 parameters: 784-256-128-10, SGD
// with momentum) and for the synthetic benchmark's ResNet-50 sizes
// (25,557,032 float32 parameters in 161 tensors, here in 4 tensors, SGD
// with momentum). ns/op is a Commit and the wait for its background copy
// of the values and momentum; settle-ns/op is that wait alone, which is
// what the next update would wait for had it come at once (the rest is
// what the caller spends in Commit itself).
//
//	go test ./hvd -run '^$' -bench ElasticCommit
func BenchmarkElasticCommit(b *testing.B) {
	for _, c := range []struct {
		name  string
		sizes []int
		f32   bool
	}{
		{"mnist", []int{784 * 256, 256, 256 * 128, 128, 128 * 10, 10}, false},
		{"resnet50", []int{6_389_258, 6_389_258, 6_389_258, 6_389_258}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var ps []*hvd.Param
			for i, n := range c.sizes {
				if c.f32 {
					ps = append(ps, hvd.NewParam32(fmt.Sprint("p", i), n))
				} else {
					ps = append(ps, hvd.NewParam(fmt.Sprint("p", i), n))
				}
			}
			sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.1, Momentum: 0.9})
			if err != nil {
				b.Fatal(err)
			}
			progress := &struct{ Epoch, Batch int }{}
			st, err := hvd.NewElasticState(sgd, progress)
			if err != nil {
				b.Fatal(err)
			}
			var wait int64 // in Settle
			b.ResetTimer()
			for i := range b.N {
				progress.Batch = i
				if err := st.Commit(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				st.Settle()
				wait += int64(time.Since(start))
			}
			b.ReportMetric(float64(wait)/float64(b.N), "settle-ns/op")
		})
	}
}
