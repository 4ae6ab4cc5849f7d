package hvd_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// BenchmarkDistributedStep times a DistributedOptimizer's step at 2
// in-process ranks: 16 float32 gradients of 64 Ki values all-reduced and
// applied by SGD, per wire type (none: float32 in place).
func BenchmarkDistributedStep(b *testing.B) {
	for _, c := range []hvd.Compression{hvd.NoCompression, hvd.FP16Compression} {
		b.Run(c.String(), func(b *testing.B) {
			rts := hvdtest.Start(b, 2)
			opts := make([]*hvd.DistributedOptimizer, 2)
			for r, rt := range rts {
				ps := make([]*hvd.Param, 16)
				for i := range ps {
					ps[i] = hvd.NewParam32(fmt.Sprint("p", i), 64<<10)
				}
				sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1e-9})
				if err != nil {
					b.Fatal(err)
				}
				if opts[r], err = hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Compression: c, InPlace: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(16 * 64 << 10 * 4)
			done := make(chan error)
			go func() {
				var err error
				for range b.N {
					if err = opts[1].Step(context.Background()); err != nil {
						break
					}
				}
				done <- err
			}()
			for range b.N {
				if err := opts[0].Step(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
