package engine

import (
	"testing"

	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestKindStats: the per-kind statistics count every all-reduce's tensor
// and bytes, and the time of those run as batches (all of them with early
// all-reduces off).
func TestKindStats(t *testing.T) {
	const steps = 20
	req := Request{Name: "g", Kind: KindAllreduce, DType: kernels.F32, Shape: []int{256}, ReduceOp: kernels.Sum}
	_, stats := earlyRun(t, meshtest.Mem, 2, false, req, steps, floatInput(kernels.F32), nil)
	for r, st := range stats {
		if ks := st.Kinds[KindAllreduce]; ks.Tensors != steps || ks.Bytes != steps*256*4 {
			t.Errorf("rank %d, early all-reduces on: all-reduce stats %+v, want %d tensors, %d bytes", r, ks, steps, steps*256*4)
		}
	}
	_, stats = earlyRun(t, meshtest.Mem, 2, true, req, steps, floatInput(kernels.F32), nil)
	for r, st := range stats {
		ks := st.Kinds[KindAllreduce]
		if ks.Tensors != steps || ks.Bytes != steps*256*4 || ks.Time <= 0 {
			t.Errorf("rank %d: all-reduce stats %+v, want %d tensors, %d bytes, some time", r, ks, steps, steps*256*4)
		}
		if st.Kinds[KindBroadcast] != (KindStats{}) {
			t.Errorf("rank %d: broadcast stats %+v, want none", r, st.Kinds[KindBroadcast])
		}
	}
}
