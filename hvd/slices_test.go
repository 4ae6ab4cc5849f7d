package hvd_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// Three ranks in this process average a gradient slice in place, in one
// call; rank 0 prints the result.
func ExampleAverageSlice() {
	err := hvdtest.Run(3, func(rt *hvd.Runtime) error {
		r := float32(rt.Rank())
		grad := []float32{r, 10 * r}
		if err := hvd.AverageSlice(context.Background(), rt, "grad", grad); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println(grad)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [1 10]
}

// TestSliceHelpers: each helper on 3 ranks, on float32, float64 and int32
// slices: AllreduceSlice (sum, max) and AverageSlice in place,
// BroadcastSlice from rank 2 in place, and AllgatherSlice of slices of
// different lengths (rank r contributes r+1 elements; rank 0 and 1 also
// gather empty slices) into a new slice, its input unchanged.
func TestSliceHelpers(t *testing.T) {
	const n = 3
	rts := hvdtest.Start(t, n)
	ctx := context.Background()
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		sum := []float64{float64(r), 1}
		if err := hvd.AllreduceSlice(ctx, rt, "sum", sum, kernels.Sum); err != nil {
			return err
		}
		if want := []float64{3, 3}; !slices.Equal(sum, want) {
			return fmt.Errorf("sum = %v, want %v", sum, want)
		}
		mx := []int32{int32(r), -int32(r)}
		if err := hvd.AllreduceSlice(ctx, rt, "max", mx, kernels.Max); err != nil {
			return err
		}
		if want := []int32{2, 0}; !slices.Equal(mx, want) {
			return fmt.Errorf("max = %v, want %v", mx, want)
		}
		avg := []float32{float32(3 * r), 6}
		if err := hvd.AverageSlice(ctx, rt, "avg", avg); err != nil {
			return err
		}
		if want := []float32{3, 6}; !slices.Equal(avg, want) {
			return fmt.Errorf("average = %v, want %v", avg, want)
		}
		w := []float32{float32(r), float32(r)}
		if err := hvd.BroadcastSlice(ctx, rt, "w", w, 2); err != nil {
			return err
		}
		if want := []float32{2, 2}; !slices.Equal(w, want) {
			return fmt.Errorf("broadcast = %v, want %v", w, want)
		}
		mine := slices.Repeat([]int32{int32(r)}, r+1)
		got, err := hvd.AllgatherSlice(ctx, rt, "rows", mine)
		if err != nil {
			return err
		}
		if want := []int32{0, 1, 1, 2, 2, 2}; !slices.Equal(got, want) {
			return fmt.Errorf("allgather = %v, want %v", got, want)
		}
		if want := slices.Repeat([]int32{int32(r)}, r+1); !slices.Equal(mine, want) {
			return fmt.Errorf("allgather changed its input to %v", mine)
		}
		var none []float32
		if r == 2 {
			none = []float32{7}
		}
		got32, err := hvd.AllgatherSlice(ctx, rt, "some", none)
		if err != nil {
			return err
		}
		if want := []float32{7}; !slices.Equal(got32, want) {
			return fmt.Errorf("allgather of empty slices and [7] = %v, want %v", got32, want)
		}
		return nil
	})
}
