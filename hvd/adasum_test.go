package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// adasumPair is (1 - a·b/(2‖a‖²))·a + (1 - a·b/(2‖b‖²))·b in float64.
func adasumPair(a, b []float64) []float64 {
	var dot, a2, b2 float64
	for i := range a {
		dot, a2, b2 = dot+a[i]*b[i], a2+a[i]*a[i], b2+b[i]*b[i]
	}
	ca, cb := 1-dot/(2*a2), 1-dot/(2*b2)
	out := make([]float64, len(a))
	for i := range a {
		out[i] = ca*a[i] + cb*b[i]
	}
	return out
}

// adasumGrad is rank r's vector for tensor k: far from orthogonal to the
// other ranks' (they share a direction), different per tensor.
func adasumGrad(r, k, n int) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = math.Sin(float64(i+k+1)) + 0.5*math.Cos(float64((r+1)*(i+2)*(k+3)))
	}
	return g
}

func closeTo(got, want []float64, tol float64) error {
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*scale {
			return fmt.Errorf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

// TestAllreduceAdasum: at 3 ranks, Adasum all-reduces of several tensors
// submitted together (which the engine may fuse) each come out as the
// Adasum tree of that tensor alone, Adasum(Adasum(g0, g2), g1); an int32
// tensor with Adasum is an error on every rank that leaves the runtime
// usable.
func TestAllreduceAdasum(t *testing.T) {
	const n = 3
	sizes := []int{7, 100, 1}
	rts := hvdtest.Start(t, n)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		ts := make([]*hvd.Tensor, len(sizes))
		hs := make([]*hvd.Handle, len(sizes))
		for k, sz := range sizes {
			ts[k] = hvd.NewTensor(fmt.Sprint("g", k), adasumGrad(r, k, sz))
			hs[k] = rt.AllreduceAsync(ts[k], kernels.Adasum, hvd.ReduceOptions{})
		}
		for k, h := range hs {
			if err := h.Wait(ctx); err != nil {
				return err
			}
			want := adasumPair(adasumPair(adasumGrad(0, k, sizes[k]), adasumGrad(2, k, sizes[k])), adasumGrad(1, k, sizes[k]))
			if err := closeTo(hvd.Values[float64](ts[k]), want, 1e-12); err != nil {
				return fmt.Errorf("tensor %d: %v", k, err)
			}
		}
		bad := hvd.NewTensor("ints", []int32{1, 2})
		if err := rt.Allreduce(ctx, bad, kernels.Adasum, hvd.ReduceOptions{}); err == nil {
			return errors.New("adasum of int32 succeeded")
		}
		f := hvd.NewTensor("after", []float32{float32(r)})
		if err := rt.Allreduce(ctx, f, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return fmt.Errorf("after the refused adasum: %v", err)
		}
		return nil
	})
}

// TestDistributedOptimizerAdasum: with Op Adasum and SGD at lr 1 from
// zero, every parameter ends at minus the Adasum of the ranks' gradients
// for that parameter alone; fp16 compression is refused.
func TestDistributedOptimizerAdasum(t *testing.T) {
	const n = 2
	lens := []int{5, 30}
	rts := hvdtest.Start(t, n)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := []*hvd.Param{hvd.NewParam("a", lens[0]), hvd.NewParam("b", lens[1])}
		sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		if err != nil {
			return err
		}
		if _, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Op: kernels.Adasum, Compression: hvd.FP16Compression}); err == nil {
			return errors.New("adasum with fp16 compression accepted")
		}
		for _, inPlace := range []bool{false, true} {
			opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Op: kernels.Adasum, InPlace: inPlace})
			if err != nil {
				return err
			}
			for k, p := range ps {
				clear(p.Value)
				copy(p.Grad, adasumGrad(r, k, lens[k]))
			}
			if err := opt.Step(context.Background()); err != nil {
				return err
			}
			for k, p := range ps {
				want := adasumPair(adasumGrad(0, k, lens[k]), adasumGrad(1, k, lens[k]))
				for i := range want {
					want[i] = -want[i]
				}
				if err := closeTo(p.Value, want, 1e-12); err != nil {
					return fmt.Errorf("in place %v: %s: %v", inPlace, p.Name, err)
				}
			}
		}
		return nil
	})
}
