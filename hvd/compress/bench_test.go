package compress_test

import (
	"context"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// BenchmarkHooks times one exchange of mnist's largest gradient (784×256
// float64 values) by each hook at one rank: the compression's own
// arithmetic, with the collectives of a job of one.
func BenchmarkHooks(b *testing.B) {
	rts := hvdtest.Start(b, 1)
	for _, c := range []struct {
		name string
		hook hvd.GradientHook
	}{
		{"plain", hvd.NoCompression},
		{"powersgd4", &compress.PowerSGD{Rank: 4}},
		{"topk1%", &compress.TopK{Fraction: 0.01}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := hvd.NewParam("w", 784*256)
			p.Shape = []int{784, 256}
			g, err := hvd.NewHookGradient(rts[0], p)
			if err != nil {
				b.Fatal(err)
			}
			src := grad(0, 0, 0, p.Len())
			b.SetBytes(int64(8 * p.Len()))
			for b.Loop() {
				copy(g.Values, src)
				if err := c.hook.ReduceGradient(context.Background(), g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
