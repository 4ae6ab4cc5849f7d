package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestAllreduceIntoClosedForm: rank r's input holds 7r+i, so the sum is
// 7·n(n-1)/2 + n·i; it lands in out, equals the in-place all-reduce of a
// copy, and the input is left as it was. The async form reads the input
// only before it returns: overwriting it at once changes nothing.
func TestAllreduceIntoClosedForm(t *testing.T) {
	onJobs(t, func(n, r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		input := func() []float64 {
			v := make([]float64, 6)
			for i := range v {
				v[i] = float64(7*r + i)
			}
			return v
		}
		want := make([]float64, 6)
		for i := range want {
			want[i] = float64(7*n*(n-1)/2 + n*i)
		}
		in := hvd.NewTensor("into/x", input(), 2, 3)
		out := hvd.NewTensor("into/out", make([]float64, 6), 2, 3)
		if err := rt.AllreduceInto(ctx, in, out, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if got := hvd.Values[float64](out); !slices.Equal(got, want) {
			return fmt.Errorf("out = %v, want %v", got, want)
		}
		if got := hvd.Values[float64](in); !slices.Equal(got, input()) {
			return fmt.Errorf("in changed to %v", got)
		}
		inPlace := hvd.NewTensor("into/x", input(), 2, 3)
		if err := rt.Allreduce(ctx, inPlace, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if !slices.Equal(hvd.Values[float64](inPlace), hvd.Values[float64](out)) {
			return fmt.Errorf("in place %v, out of place %v", hvd.Values[float64](inPlace), hvd.Values[float64](out))
		}

		// async, a deadline-bearing wait, and an input overwritten at once
		out2 := hvd.NewTensor("", make([]float64, 6), 2, 3) // out's name is not used
		h := rt.AllreduceIntoAsync(in, out2, kernels.Sum, hvd.ReduceOptions{})
		clear(hvd.Values[float64](in))
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := h.Wait(wctx); err != nil {
			return err
		}
		if got := hvd.Values[float64](out2); !slices.Equal(got, want) || h.Output() != out2 {
			return fmt.Errorf("async out = %v (Output is out: %v), want %v", got, h.Output() == out2, want)
		}
		copy(hvd.Values[float64](in), input())

		// in == out, and two tensors over the same bytes: in place
		same := hvd.NewTensor("into/same", input(), 2, 3)
		if err := rt.AllreduceInto(ctx, same, same, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		alias := &hvd.Tensor{Name: "other", DType: same.DType, Shape: []int{6}, Data: same.Data} // a vector of the same 6 elements is not the same shape
		if err := rt.AllreduceInto(ctx, same, alias, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrInvalidArgument) {
			return fmt.Errorf("output of another shape: %v", err)
		}
		alias.Shape = []int{2, 3}
		copy(hvd.Values[float64](same), input())
		if err := rt.AllreduceInto(ctx, same, alias, kernels.Average, hvd.ReduceOptions{Postscale: float64(2 * n)}); err != nil {
			return err
		}
		for i, v := range hvd.Values[float64](same) { // mean·2n = 2·sum
			if v != 2*want[i] {
				return fmt.Errorf("aliased in place: %v, want twice %v", hvd.Values[float64](same), want)
			}
		}
		return nil
	})
}

// TestAllreduceIntoBadOutput: an output of another dtype, shape or length,
// nil, or partly overlapping the input fails at once with
// ErrInvalidArgument, submits nothing and leaves both tensors alone.
func TestAllreduceIntoBadOutput(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		backing := []float32{1, 2, 3, 4, 5}
		in := hvd.NewTensor("bad/in", backing[:4])
		outs := map[string]*hvd.Tensor{
			"nil":     nil,
			"dtype":   hvd.NewTensor("o", make([]float64, 4)),
			"shape":   hvd.NewTensor("o", make([]float32, 4), 2, 2),
			"length":  hvd.NewTensor("o", make([]float32, 5)),
			"bytes":   {Name: "o", DType: kernels.F32, Shape: []int{4}, Data: make([]byte, 12)},
			"overlap": hvd.NewTensor("o", backing[1:5]), // in's last three elements and one more
		}
		for what, out := range outs {
			if err := rt.AllreduceInto(ctx, in, out, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrInvalidArgument) {
				return fmt.Errorf("%s output: %v, want ErrInvalidArgument", what, err)
			}
			if err := rt.AllreduceIntoAsync(in, out, kernels.Sum, hvd.ReduceOptions{}).Wait(ctx); !errors.Is(err, hvd.ErrInvalidArgument) {
				return fmt.Errorf("%s output, async: %v, want ErrInvalidArgument", what, err)
			}
		}
		if !slices.Equal(backing, []float32{1, 2, 3, 4, 5}) {
			return fmt.Errorf("a rejected call wrote: %v", backing)
		}
		// a valid call under the same name goes through: nothing was left in flight
		out := hvd.NewTensor("o", make([]float32, 4))
		if err := rt.AllreduceInto(ctx, in, out, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if got := hvd.Values[float32](out); !slices.Equal(got, []float32{2, 4, 6, 8}) {
			return fmt.Errorf("out = %v", got)
		}
		return nil
	})
}

// TestAllreduceIntoMismatch: inputs whose lengths differ between ranks fail
// with ErrMismatch on every rank, as the in-place all-reduce does.
func TestAllreduceIntoMismatch(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		in := hvd.NewTensor("mm", make([]int32, 2+r%2))
		out := hvd.NewTensor("mm", make([]int32, 2+r%2))
		if err := rt.AllreduceInto(context.Background(), in, out, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrMismatch) {
			return fmt.Errorf("got %v, want ErrMismatch", err)
		}
		return nil
	})
}
