package hvd_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestHierarchicalUnderTheEngine: with the ranks on two hosts of two
// (interleaved, as mpirun's by-node mapping places them) and the two-level
// algorithms forced, fused all-reduces submitted in any order, repeated so
// that the response cache answers them, uneven all-gathers and broadcasts
// give the same results as on one host.
func TestHierarchicalUnderTheEngine(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(fmt.Sprintf("tcp=%v", tcp), func(t *testing.T) {
			opts := []hvdtest.Option{hvdtest.WithConfig(func(cfg *hvd.Config) {
				cfg.Comm.Hosts = []int{0, 1, 0, 1}
				cfg.Comm.Hierarchical = collective.HierarchyOn
				cfg.Comm.SegmentBytes, cfg.Comm.InlineBytes = 256, 512
			})}
			if tcp {
				opts = append(opts, hvdtest.OverTCP())
			}
			rts := hvdtest.Start(t, 4, opts...)
			ctx := context.Background()
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				for step := range 3 {
					var hs []*hvd.Handle
					var ts []*hvd.Tensor
					for k := range 5 {
						i := (k + r) % 5 // every rank submits in its own order
						data := make([]float32, 100*(i+1)+i)
						for e := range data {
							data[e] = float32(r*(e%7) + step)
						}
						tn := hvd.NewTensor(fmt.Sprintf("g%d", i), data)
						ts = append(ts, tn)
						hs = append(hs, rt.AllreduceAsync(tn, kernels.Sum, hvd.ReduceOptions{}))
					}
					for k, h := range hs {
						if err := h.Wait(ctx); err != nil {
							return err
						}
						for e, v := range hvd.Values[float32](ts[k]) {
							if want := float32(6*(e%7) + 4*step); v != want {
								return fmt.Errorf("step %d %s[%d] = %v, want %v", step, ts[k].Name, e, v, want)
							}
						}
					}
				}
				rows := make([]int64, (r+1)*3)
				for e := range rows {
					rows[e] = int64(r*1000 + e)
				}
				all, err := rt.Allgather(ctx, hvd.NewTensor("rows", rows, r+1, 3))
				if err != nil {
					return err
				}
				got, k := hvd.Values[int64](all), 0
				for src := range 4 {
					for e := range (src + 1) * 3 {
						if got[k] != int64(src*1000+e) {
							return fmt.Errorf("allgather element %d = %d, want %d", k, got[k], src*1000+e)
						}
						k++
					}
				}
				b := make([]float64, 3000)
				if r == 3 {
					for e := range b {
						b[e] = float64(e) / 4
					}
				}
				if err := rt.Broadcast(ctx, hvd.NewTensor("b", b), 3); err != nil {
					return err
				}
				for e, v := range b {
					if v != float64(e)/4 {
						return fmt.Errorf("broadcast element %d = %v", e, v)
					}
				}
				return nil
			})
		})
	}
}
