package hvdgorgonia_test

import (
	"context"
	"errors"
	"testing"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// An all-reduce of the tensors that Tensor returns changes the Gorgonia
// values themselves: dense float32 and float64 tensors and scalars.
func TestTensorSharesMemory(t *testing.T) {
	err := hvdtest.Run(3, func(rt *hvd.Runtime) error {
		r := float64(rt.Rank() + 1)
		d32 := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, float32(r)}))
		d64 := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{r, 2 * r, 3}))
		s32, s64 := G.NewF32(float32(r)), G.NewF64(10*r)
		vals := []G.Value{d32, d64, s32, s64}
		var hs []*hvd.Handle
		for i, v := range vals {
			ht, err := hvdgorgonia.Tensor(string(rune('a'+i)), v)
			if err != nil {
				return err
			}
			hs = append(hs, rt.AllreduceAsync(ht, kernels.Sum, hvd.ReduceOptions{}))
		}
		for _, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				return err
			}
		}
		// Sum of r over 3 ranks = 6.
		if got := d32.Data().([]float32); got[0] != 3 || got[3] != 6 {
			t.Errorf("float32 dense after sum = %v, want [3 6 9 6]", got)
		}
		if got := d64.Data().([]float64); got[0] != 6 || got[1] != 12 || got[2] != 9 {
			t.Errorf("float64 dense after sum = %v, want [6 12 9]", got)
		}
		if *s32 != 6 || *s64 != 60 {
			t.Errorf("scalars after sum = %v %v, want 6 60", *s32, *s64)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTensorRejects(t *testing.T) {
	for name, v := range map[string]G.Value{
		"int dense":  tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2})),
		"0-d dense":  tensor.New(tensor.FromScalar(float32(1))),
		"int scalar": G.NewI(1),
		"nil":        nil,
		"strided view": func() G.Value {
			d := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))
			if err := d.T(); err != nil {
				t.Fatal(err)
			}
			return d
		}(),
	} {
		if _, err := hvdgorgonia.Tensor("x", v); !errors.Is(err, hvdgorgonia.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

func TestNewDistributedSolverRejects(t *testing.T) {
	rts := hvdtest.Start(t, 1)
	if _, err := hvdgorgonia.NewDistributedSolver(nil, rts[0], hvdgorgonia.Options{}); !errors.Is(err, hvdgorgonia.ErrInvalid) {
		t.Errorf("nil solver: err = %v, want ErrInvalid", err)
	}
	if _, err := hvdgorgonia.NewDistributedSolver(G.NewVanillaSolver(), rts[0], hvdgorgonia.Options{Op: kernels.Max}); !errors.Is(err, hvdgorgonia.ErrInvalid) {
		t.Errorf("Op Max: err = %v, want ErrInvalid", err)
	}
	// No test here calls hvd.Init, so there is no default runtime.
	if _, err := hvdgorgonia.NewDistributedSolver(G.NewVanillaSolver(), nil, hvdgorgonia.Options{}); !errors.Is(err, hvd.ErrNotInitialized) {
		t.Errorf("no runtime: err = %v, want hvd.ErrNotInitialized", err)
	}
}

// Dense views a gorovod tensor's memory: writing through it changes the
// tensor, in its shape.
func TestDenseSharesMemory(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	d, err := hvdgorgonia.Dense(hvd.NewTensor("t", data, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Shape().Eq(tensor.Shape{2, 3}) {
		t.Fatalf("shape %v, want (2, 3)", d.Shape())
	}
	if err := d.SetAt(float32(9), 1, 2); err != nil {
		t.Fatal(err)
	}
	if data[5] != 9 {
		t.Fatalf("data %v after setting (1, 2) of the dense tensor to 9", data)
	}
	v, err := hvdgorgonia.Dense(hvd.NewTensor("v", []float64{1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Shape().Eq(tensor.Shape{2}) {
		t.Fatalf("vector: shape %v, want (2)", v.Shape())
	}
	if _, err := hvdgorgonia.Dense(hvd.NewTensor("i", []int32{1})); !errors.Is(err, hvdgorgonia.ErrUnsupported) {
		t.Errorf("int32: err = %v, want ErrUnsupported", err)
	}
}
