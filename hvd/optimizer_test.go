package hvd_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// stepsOf runs n steps of opt on one parameter w (start 1) whose gradient
// is always g, and returns w after each step.
func stepsOf(t *testing.T, mk func([]*hvd.Param) (hvd.Optimizer, error), g float64, n int) []float64 {
	t.Helper()
	p := hvd.NewParam("w", 1)
	p.Value[0] = 1
	opt, err := mk([]*hvd.Param{p})
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for range n {
		p.Grad[0] = g
		if err := opt.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Value[0])
	}
	return out
}

func sgd(c hvd.SGDConfig) func([]*hvd.Param) (hvd.Optimizer, error) {
	return func(ps []*hvd.Param) (hvd.Optimizer, error) { return hvd.NewSGD(ps, c) }
}

func TestSGDUpdateRules(t *testing.T) {
	cases := []struct {
		name string
		cfg  hvd.SGDConfig
		want []float64 // w after each step, gradient 1, w0 = 1
	}{
		{"plain", hvd.SGDConfig{LR: 0.1}, []float64{0.9, 0.8, 0.7}},
		// buf: 1, 1.5, 1.75
		{"momentum", hvd.SGDConfig{LR: 0.1, Momentum: 0.5}, []float64{0.9, 0.75, 0.575}},
		// g + μ·buf: 1.5, 1.75, 1.875
		{"nesterov", hvd.SGDConfig{LR: 0.1, Momentum: 0.5, Nesterov: true}, []float64{0.85, 0.675, 0.4875}},
		// g = 1 + 0.5·w: 1.5 → w 0.85; 1.425 → 0.7075; 1.35375 → 0.572125
		{"weight decay", hvd.SGDConfig{LR: 0.1, WeightDecay: 0.5}, []float64{0.85, 0.7075, 0.572125}},
	}
	for _, c := range cases {
		got := stepsOf(t, sgd(c.cfg), 1, len(c.want))
		for i := range got {
			if !near(got[i], c.want[i], 1e-12) {
				t.Errorf("%s: step %d: w = %v, want %v", c.name, i+1, got[i], c.want[i])
			}
		}
	}
}

func TestAdamMovesByLRAgainstTheGradientSign(t *testing.T) {
	// With a constant gradient the bias-corrected step is lr·g/(|g|+ε).
	adam := func(ps []*hvd.Param) (hvd.Optimizer, error) { return hvd.NewAdam(ps, hvd.AdamConfig{LR: 0.01}) }
	got := stepsOf(t, adam, -3, 3)
	for i, w := range got {
		if want := 1 + 0.01*float64(i+1); !near(w, want, 1e-8) {
			t.Errorf("step %d: w = %v, want %v", i+1, w, want)
		}
	}
	// AdamW shrinks the weight by lr·wd before the moment step.
	adamw := func(ps []*hvd.Param) (hvd.Optimizer, error) {
		return hvd.NewAdam(ps, hvd.AdamConfig{LR: 0.1, WeightDecay: 0.5, Decoupled: true})
	}
	if w := stepsOf(t, adamw, 2, 1)[0]; !near(w, 1-0.05-0.1, 1e-8) {
		t.Errorf("AdamW: w = %v, want 0.85", w)
	}
}

func TestOptimizerStateRoundTrip(t *testing.T) {
	mk := func() (*hvd.Adam, *hvd.Param) {
		p := hvd.NewParam("w", 2)
		a, err := hvd.NewAdam([]*hvd.Param{p}, hvd.AdamConfig{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return a, p
	}
	a, p := mk()
	p.Grad[0], p.Grad[1] = 1, -2
	a.Step(context.Background())
	st := a.State()
	if st.Steps != 1 || len(st.Slots) != 2 || !near(st.Slots["adam.m/w"][1], -0.2, 1e-12) {
		t.Fatalf("state = %+v", st)
	}
	st.Slots["adam.m/w"][0] = 42 // a copy: the optimizer is unchanged
	if a.State().Slots["adam.m/w"][0] == 42 {
		t.Error("State shares its buffers with the optimizer")
	}
	b, _ := mk()
	if err := b.SetState(a.State()); err != nil {
		t.Fatal(err)
	}
	if b.State().Steps != 1 || b.LR() != 0.1 {
		t.Errorf("loaded state = %+v", b.State())
	}
	bad := a.State()
	bad.Slots["adam.v/w"] = []float64{1}
	if err := b.SetState(bad); !errors.Is(err, hvd.ErrOptimizerState) {
		t.Errorf("short slot: %v", err)
	}
	delete(bad.Slots, "adam.v/w")
	if err := b.SetState(bad); !errors.Is(err, hvd.ErrOptimizerState) {
		t.Errorf("missing slot: %v", err)
	}
	bad.Slots["adam.v/w"], bad.Slots["extra"] = []float64{0, 0}, nil
	if err := b.SetState(bad); !errors.Is(err, hvd.ErrOptimizerState) {
		t.Errorf("unknown slot: %v", err)
	}
}

func TestInvalidParams(t *testing.T) {
	for _, ps := range [][]*hvd.Param{
		{nil},
		{{Name: "", Value: []float64{1}, Grad: []float64{1}}},
		{hvd.NewParam("a", 1), hvd.NewParam("a", 2)},
		{{Name: "a", Value: []float64{1}, Grad: nil}},
		{{Name: "a", Value32: []float32{1, 2}, Grad32: []float32{1}}},
		{{Name: "a", Value: []float64{1}, Grad: []float64{1}, Value32: []float32{1}, Grad32: []float32{1}}},
		{{Name: "a", Grad: []float64{1}, Value32: []float32{1}}},
	} {
		if _, err := hvd.NewSGD(ps, hvd.SGDConfig{}); !errors.Is(err, hvd.ErrInvalidParam) {
			t.Errorf("%v: %v", ps, err)
		}
	}
	opt, _ := hvd.NewSGD([]*hvd.Param{hvd.NewParam("a", 2), hvd.NewParam32("b", 2)}, hvd.SGDConfig{})
	opt.Params()[0].Grad[1] = math.Pi
	opt.Params()[1].Grad32[1] = math.Pi
	opt.ZeroGrad()
	if opt.Params()[0].Grad[1] != 0 || opt.Params()[1].Grad32[1] != 0 {
		t.Error("ZeroGrad left a gradient")
	}
}

// TestFloat32ParamsFollowFloat64 runs each optimizer on a float64 and a
// float32 copy of the same parameter and gradients: the float32 values
// must stay within float32 rounding of the float64 ones, and the optimizer
// state (kept in float64 for both) must match just as closely.
func TestFloat32ParamsFollowFloat64(t *testing.T) {
	for name, mk := range map[string]func([]*hvd.Param) (hvd.Optimizer, error){
		"sgd nesterov wd": sgd(hvd.SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-2}),
		"adam":            func(ps []*hvd.Param) (hvd.Optimizer, error) { return hvd.NewAdam(ps, hvd.AdamConfig{LR: 0.01}) },
		"adamw": func(ps []*hvd.Param) (hvd.Optimizer, error) {
			return hvd.NewAdam(ps, hvd.AdamConfig{LR: 0.01, WeightDecay: 0.1, Decoupled: true})
		},
	} {
		p64, p32 := hvd.NewParam("w", 64), hvd.NewParam32("w", 64)
		if p32.Len() != 64 || p32.DType() != kernels.F32 || p64.DType() != kernels.F64 {
			t.Fatalf("Len %d, DTypes %v %v", p32.Len(), p32.DType(), p64.DType())
		}
		for i := range p64.Value {
			p64.Value[i] = float64(float32(math.Sin(float64(i))))
			p32.Value32[i] = float32(p64.Value[i])
		}
		o64, err := mk([]*hvd.Param{p64})
		if err != nil {
			t.Fatal(err)
		}
		o32, err := mk([]*hvd.Param{p32})
		if err != nil {
			t.Fatal(err)
		}
		for step := range 10 {
			for i := range p64.Grad {
				g := float32(math.Cos(float64(i*step + 1)))
				p64.Grad[i], p32.Grad32[i] = float64(g), g
			}
			o64.Step(context.Background())
			o32.Step(context.Background())
		}
		for i := range p64.Value {
			if !near(float64(p32.Value32[i]), p64.Value[i], 1e-5) {
				t.Errorf("%s: w[%d] float32 %v, float64 %v", name, i, p32.Value32[i], p64.Value[i])
				break
			}
		}
		if p32.Value32[3] == float32(math.Sin(3)) {
			t.Errorf("%s: the float32 parameter did not move", name)
		}
		s64, s32 := o64.State(), o32.State()
		for k, v := range s64.Slots {
			for i := range v {
				if !near(s32.Slots[k][i], v[i], 1e-5) {
					t.Errorf("%s: %s[%d] float32 run %v, float64 run %v", name, k, i, s32.Slots[k][i], v[i])
					break
				}
			}
		}
	}
}
