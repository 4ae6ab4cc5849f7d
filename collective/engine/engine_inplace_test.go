package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestEngineClobberAndOut: a reduce-scatter with Clobber reduces in the
// submitted buffer and returns its share there; an all-gather with Out of
// the result's size writes into it, also when the submitted rows are
// Out's own share (the sharded optimizer's round trip); an Out of another
// size is ignored. Three ranks, 7 elements: shares of 3, 2 and 2.
func TestEngineClobberAndOut(t *testing.T) {
	const n = 3
	es, _ := newEngines(t, meshtest.Kinds()[0].Make, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		buf := []int32{1, 2, 3, 4, 5, 6, 7}
		h := e.Submit(engine.Request{Name: "rs", Kind: engine.KindReducescatter, DType: kernels.I32, Shape: []int{7}, ReduceOp: kernels.Sum, Clobber: true}, kernels.AsBytes(buf))
		if err := h.Wait(context.Background()); err != nil {
			return err
		}
		out, _ := h.Output()
		lo, hi := []int{0, 3, 5}[r], []int{3, 5, 7}[r]
		mine := kernels.FromBytes[int32](out)
		if want := []int32{3, 6, 9, 12, 15, 18, 21}[lo:hi]; !slices.Equal(mine, want) {
			return fmt.Errorf("reducescatter = %v, want %v", mine, want)
		}
		if unsafe.SliceData(mine) != &buf[lo] {
			return fmt.Errorf("rank %d's share is not in the submitted buffer", r)
		}
		for i := lo; i < hi; i++ {
			buf[i] = int32(100 * r)
		}
		whole := kernels.AsBytes(buf)
		h = e.Submit(engine.Request{Name: "ag", Kind: engine.KindAllgather, DType: kernels.I32, Shape: []int{hi - lo}, Out: whole}, whole[4*lo:4*hi])
		if err := h.Wait(context.Background()); err != nil {
			return err
		}
		got, shape := h.Output()
		if unsafe.SliceData(got) != &whole[0] || fmt.Sprint(buf, shape) != "[0 0 0 100 100 200 200] [7]" {
			return fmt.Errorf("allgather into Out = %v %v (in Out: %v)", buf, shape, unsafe.SliceData(got) == &whole[0])
		}
		small := make([]byte, 4)
		h = e.Submit(engine.Request{Name: "ag2", Kind: engine.KindAllgather, DType: kernels.I32, Shape: []int{1}, Out: small}, kernels.AsBytes([]int32{int32(r)}))
		if err := h.Wait(context.Background()); err != nil {
			return err
		}
		if got, _ := h.Output(); fmt.Sprint(kernels.FromBytes[int32](got)) != "[0 1 2]" || len(got) == len(small) {
			return fmt.Errorf("allgather with a wrong-sized Out = %v", kernels.FromBytes[int32](got))
		}
		return nil
	})
}
