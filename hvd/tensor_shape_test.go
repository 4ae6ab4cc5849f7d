package hvd_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestEmptyShapeIsAVector: a Tensor without a Shape is the vector of all
// the elements of its Data, as its doc says, and matches a rank that gives
// the shape explicitly.
func TestEmptyShapeIsAVector(t *testing.T) {
	bare := func(name string, v []float64) *hvd.Tensor {
		return &hvd.Tensor{Name: name, DType: kernels.F64, Data: kernels.AsBytes(v)}
	}
	if n := bare("x", make([]float64, 5)).Count(); n != 5 {
		t.Errorf("Count of a shapeless tensor of 5 elements = %d", n)
	}
	rts := hvdtest.Start(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a rank that fails alone leaves the other waiting
	defer cancel()
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		v := []float64{float64(r + 1), 10}
		x := bare("x", v)
		if r == 1 {
			x = hvd.NewTensor("x", v) // the shape [2] given explicitly
		}
		if err := rt.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if !slices.Equal(v, []float64{3, 20}) {
			t.Errorf("rank %d: sum %v, want [3 20]", r, v)
		}
		g, err := rt.Allgather(ctx, bare("g", []float64{float64(r)}))
		if err != nil {
			return err
		}
		if !slices.Equal(g.Shape, []int{2}) || !slices.Equal(hvd.Values[float64](g), []float64{0, 1}) {
			t.Errorf("rank %d: allgather shape %v values %v, want [2] [0 1]", r, g.Shape, hvd.Values[float64](g))
		}
		return nil
	})

	ragged := &hvd.Tensor{Name: "odd", DType: kernels.F32, Data: make([]byte, 5)}
	if err := rts[0].Allreduce(ctx, ragged, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrInvalidTensor) {
		t.Errorf("5 bytes of float32 without a shape: %v, want ErrInvalidTensor", err)
	}
}
