package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestEarlyAllreduceJoin: two ranks repeat one small all-reduce, which
// completes within the negotiation exchange (with two ranks its data are
// reduced where they lie); then rank 1 joins while rank 0 goes on. Rank
// 1's Join must not let its padding into rank 0's results: every step of
// rank 0 alone sums its own input with the joined rank's zeros, and both
// Joins return with rank 0 as the last to join. On every kind of link.
func TestEarlyAllreduceJoin(t *testing.T) {
	const steps, alone = 12, 4
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			es, _ := newEngines(t, tr.Make, 2, testConfig())
			req := allreduceReq("metric", kernels.F64, kernels.Sum, 64)
			input := func(r, s int) []float64 {
				v := make([]float64, 64)
				for i := range v {
					v[i] = float64(1000*(r+1) + 10*s + i)
				}
				return v
			}
			onEngines(t, es, func(r int, e *engine.Engine) error {
				n := steps
				if r == 0 {
					n += alone
				}
				for s := range n {
					buf := input(r, s)
					if err := e.SubmitDriven(req, kernels.AsBytes(buf)).Wait(context.Background()); err != nil {
						return fmt.Errorf("step %d: %w", s, err)
					}
					want := input(r, s)
					for i := range want {
						if s < steps {
							want[i] += input(1-r, s)[i]
						}
					}
					if !slices.Equal(buf, want) {
						return fmt.Errorf("step %d: got %v..., want %v...", s, buf[:3], want[:3])
					}
				}
				last, err := e.Join(context.Background())
				if err != nil || last != 0 {
					return fmt.Errorf("Join: last %d, %v; want 0", last, err)
				}
				return nil
			})
			if early := es[0].Stats().Early; early < steps-2 {
				t.Fatalf("rank 0: %d of %d steps early", early, steps)
			}
		})
	}
}
