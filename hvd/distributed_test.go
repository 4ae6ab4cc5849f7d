package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// rankGrad is rank r's gradient of parameter p in backward pass k.
func rankGrad(r, p, k, n int) []float64 {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(p*100+k)))
	g := make([]float64, n)
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	return g
}

var paramSizes = []int{5, 1, 0, 300, 17}

func params() []*hvd.Param { return paramsOf(float64Model) }

// A model's parameter types: all float64, all float32, or alternating.
const (
	float64Model = iota
	float32Model
	mixedModel
)

func paramsOf(model int) []*hvd.Param {
	ps := make([]*hvd.Param, len(paramSizes))
	for i, n := range paramSizes {
		name := fmt.Sprintf("layer%d", i)
		if model == float32Model || model == mixedModel && i%2 == 1 {
			ps[i] = hvd.NewParam32(name, n)
		} else {
			ps[i] = hvd.NewParam(name, n)
		}
	}
	return ps
}

// setGrad copies g into p's gradient (rounded to float32 for a float32
// parameter).
func setGrad(p *hvd.Param, g []float64) {
	if !p.Is32() {
		copy(p.Grad, g)
		return
	}
	for i, v := range g {
		p.Grad32[i] = float32(v)
	}
}

// clearGrad zeroes p's gradient.
func clearGrad(p *hvd.Param) {
	clear(p.Grad)
	clear(p.Grad32)
}

// at returns element i of p's gradient and value, widened to float64.
func at(p *hvd.Param, i int) (grad, value float64) {
	if p.Is32() {
		return float64(p.Grad32[i]), float64(p.Value32[i])
	}
	return p.Grad[i], p.Value[i]
}

// meanGrad is the mean of every rank's gradient of parameter p over ranks
// and passes (or their sum over ranks, with sum), of the gradients rounded
// to float32 with f32.
func meanGrad(ranks, passes, p int, sum, f32 bool) []float64 {
	out := make([]float64, paramSizes[p])
	for r := range ranks {
		for k := range passes {
			for i, v := range rankGrad(r, p, k, len(out)) {
				if f32 {
					v = float64(float32(v))
				}
				out[i] += v / float64(passes)
			}
		}
	}
	if !sum {
		for i := range out {
			out[i] /= float64(ranks)
		}
	}
	return out
}

func TestDistributedGradientIsMeanOfRankGradients(t *testing.T) {
	cases := []struct {
		name   string
		opts   hvd.DistributedOptions
		ranks  int
		passes int
		tol    float64
		model  int
	}{
		{"avg", hvd.DistributedOptions{}, 4, 1, 1e-12, float64Model},
		{"sum", hvd.DistributedOptions{Op: kernels.Sum}, 3, 1, 1e-12, float64Model},
		{"single rank", hvd.DistributedOptions{}, 1, 1, 0, float64Model},
		{"accumulate 3 passes", hvd.DistributedOptions{BackwardPassesPerStep: 3}, 4, 3, 1e-12, float64Model},
		{"predivide", hvd.DistributedOptions{GradientPredivideFactor: 2}, 4, 1, 1e-12, float64Model},
		{"fp32", hvd.DistributedOptions{Compression: hvd.FP32Compression}, 4, 1, 1e-6, float64Model},
		{"fp16, 2 passes", hvd.DistributedOptions{Compression: hvd.FP16Compression, BackwardPassesPerStep: 2}, 4, 2, 4e-3, float64Model},
		{"bf16", hvd.DistributedOptions{Compression: hvd.BF16Compression}, 4, 1, 3e-2, float64Model},
		{"fp16 predivide", hvd.DistributedOptions{Compression: hvd.FP16Compression, GradientPredivideFactor: 4}, 4, 1, 4e-3, float64Model},
		// float32 parameters: their gradients travel as float32 without
		// compression; the reference sums the float32-rounded inputs in
		// float64, so the tolerance is float32's rounding.
		{"float32 avg", hvd.DistributedOptions{}, 4, 1, 1e-6, float32Model},
		{"float32 sum", hvd.DistributedOptions{Op: kernels.Sum}, 3, 1, 1e-6, float32Model},
		{"float32 single rank", hvd.DistributedOptions{}, 1, 1, 1e-7, float32Model},
		{"float32 accumulate 3 passes", hvd.DistributedOptions{BackwardPassesPerStep: 3}, 4, 3, 1e-6, float32Model},
		{"float32 predivide", hvd.DistributedOptions{GradientPredivideFactor: 2}, 4, 1, 1e-6, float32Model},
		{"float32 fp16", hvd.DistributedOptions{Compression: hvd.FP16Compression}, 4, 1, 4e-3, float32Model},
		{"float32 bf16, 2 passes", hvd.DistributedOptions{Compression: hvd.BF16Compression, BackwardPassesPerStep: 2}, 4, 2, 3e-2, float32Model},
		{"mixed float32 and float64", hvd.DistributedOptions{}, 4, 1, 1e-6, mixedModel},
		{"mixed, fp32", hvd.DistributedOptions{Compression: hvd.FP32Compression}, 2, 1, 1e-6, mixedModel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rts := hvdtest.Start(t, c.ranks)
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				return checkStep(rt, c.model, c.opts, c.passes, c.tol)
			})
		})
	}
}

// checkStep runs one step of passes backward passes with SGD at lr 1 from
// zero parameters, reporting gradients in reverse order as a backward pass
// does, and checks that every parameter moved by minus the mean gradient.
func checkStep(rt *hvd.Runtime, model int, opts hvd.DistributedOptions, passes int, tol float64) error {
	ctx := context.Background()
	ps := paramsOf(model)
	sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
	if err != nil {
		return err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, opts)
	if err != nil {
		return err
	}
	for k := range passes {
		for p := len(ps) - 1; p >= 0; p-- {
			setGrad(ps[p], rankGrad(rt.Rank(), p, k, ps[p].Len()))
			if p%2 == 0 { // the others are left for Step to report
				if err := opt.GradReady(ps[p].Name); err != nil {
					return err
				}
			}
			clearGrad(ps[p]) // the optimizer must have its own copy
		}
		for p := range ps {
			setGrad(ps[p], rankGrad(rt.Rank(), p, k, ps[p].Len()))
		}
		if err := opt.Step(ctx); err != nil {
			return err
		}
		if _, v := at(ps[0], 0); k < passes-1 && v != 0 {
			return fmt.Errorf("pass %d of %d updated the parameters: %v", k+1, passes, v)
		}
	}
	for p, param := range ps {
		want := meanGrad(rt.Size(), passes, p, opts.Op == kernels.Sum, param.Is32())
		for i := range want {
			if g, v := at(param, i); !near(g, want[i], tol) || !near(v, -want[i], tol) {
				return fmt.Errorf("%s[%d]: grad %v value %v, want grad %v", param.Name, i, g, v, want[i])
			}
		}
	}
	return nil
}

func TestDistributedOptimizerStepsAgain(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := []*hvd.Param{hvd.NewParam("w", 2)}
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.5})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
		if err != nil {
			return err
		}
		for range 3 {
			ps[0].Grad[0], ps[0].Grad[1] = float64(r), 1
			if err := opt.Step(context.Background()); err != nil {
				return err
			}
		}
		if ps[0].Value[0] != -0.75 || ps[0].Value[1] != -1.5 {
			return fmt.Errorf("after 3 steps w = %v, want [-0.75 -1.5]", ps[0].Value)
		}
		return nil
	})
}

func TestSynchronizeThenStep(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		ps := []*hvd.Param{hvd.NewParam("w", 1)}
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, _ := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
		ps[0].Grad[0] = float64(10 * (r + 1)) // mean 15
		if err := opt.Synchronize(ctx); err != nil {
			return err
		}
		if ps[0].Grad[0] != 15 {
			return fmt.Errorf("synchronized grad %v, want 15", ps[0].Grad[0])
		}
		ps[0].Grad[0] = 1 // clipped
		if err := opt.GradReady("w"); !errors.Is(err, hvd.ErrGradReady) {
			return fmt.Errorf("GradReady after Synchronize: %v", err)
		}
		if err := opt.Step(ctx); err != nil {
			return err
		}
		if ps[0].Value[0] != -1 {
			return fmt.Errorf("w = %v, want -1 (the clipped gradient)", ps[0].Value[0])
		}
		return nil
	})
}

func TestGradReadyMisuse(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	ps := []*hvd.Param{hvd.NewParam("w", 1)}
	sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
	opt, _ := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{BackwardPassesPerStep: 2})
	if err := opt.GradReady("nope"); !errors.Is(err, hvd.ErrGradReady) {
		t.Errorf("unknown name: %v", err)
	}
	if err := opt.GradReady("w"); err != nil {
		t.Fatal(err)
	}
	if err := opt.GradReady("w"); !errors.Is(err, hvd.ErrGradReady) {
		t.Errorf("twice in a pass: %v", err)
	}
	if err := opt.Synchronize(context.Background()); !errors.Is(err, hvd.ErrGradReady) {
		t.Errorf("Synchronize on pass 1 of 2: %v", err)
	}
	if err := opt.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDistributedOptionsRejected(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	sgd, _ := hvd.NewSGD([]*hvd.Param{hvd.NewParam("w", 1)}, hvd.SGDConfig{})
	for _, o := range []hvd.DistributedOptions{
		{Op: kernels.Max},
		{BackwardPassesPerStep: -1},
		{Op: kernels.Sum, GradientPredivideFactor: 2},
		{Compression: 9},
	} {
		if _, err := hvd.NewDistributedOptimizer(sgd, rt, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := hvd.NewDistributedOptimizer(sgd, nil, hvd.DistributedOptions{}); !errors.Is(err, hvd.ErrNotInitialized) {
		t.Errorf("nil runtime before Init: %v", err)
	}
}

func TestRanksMayReportInDifferentOrders(t *testing.T) {
	const n = 3
	rts := hvdtest.Start(t, n)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := params()
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
		if err != nil {
			return err
		}
		for i := range ps { // rank r starts with parameter r
			p := ps[(i+r)%len(ps)]
			copy(p.Grad, rankGrad(r, (i+r)%len(ps), 0, len(p.Grad)))
			if err := opt.GradReady(p.Name); err != nil {
				return err
			}
		}
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		for p, param := range ps {
			want := meanGrad(n, 1, p, false, false)
			for i := range want {
				if !near(param.Grad[i], want[i], 1e-12) {
					return fmt.Errorf("%s[%d] = %v, want %v", param.Name, i, param.Grad[i], want[i])
				}
			}
		}
		return nil
	})
}

func TestConcurrentGradReady(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := params()
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, _ := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
		errs := make(chan error, len(ps))
		for p := range ps { // one goroutine per layer, as a parallel backward pass might
			go func() {
				copy(ps[p].Grad, rankGrad(r, p, 0, len(ps[p].Grad)))
				errs <- opt.GradReady(ps[p].Name)
			}()
		}
		for range ps {
			if err := <-errs; err != nil {
				return err
			}
		}
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		if want := meanGrad(2, 1, 3, false, false); !near(ps[3].Grad[7], want[7], 1e-12) {
			return fmt.Errorf("grad %v, want %v", ps[3].Grad[7], want[7])
		}
		return nil
	})
}

// TestPredivideKeepsHalfSumsFinite: four gradients of 30000 sum to 120000,
// past float16's largest value (65504). Without a predivide factor the fp16
// sum overflows; dividing by 4 before the sum keeps it finite and the
// average exact.
func TestPredivideKeepsHalfSumsFinite(t *testing.T) {
	for _, f := range []float64{1, 4} {
		rts := hvdtest.Start(t, 4)
		each(t, rts, func(r int, rt *hvd.Runtime) error {
			p := hvd.NewParam32("w", 3)
			sgd, _ := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
			opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Compression: hvd.FP16Compression, GradientPredivideFactor: f})
			if err != nil {
				return err
			}
			for i := range p.Grad32 {
				p.Grad32[i] = 30000
			}
			if err := opt.Synchronize(context.Background()); err != nil {
				return err
			}
			inf := math.IsInf(float64(p.Grad32[0]), 1)
			switch {
			case f == 1 && !inf:
				return fmt.Errorf("without predivide the fp16 sum gave %v, want +Inf", p.Grad32[0])
			case f == 4 && p.Grad32[0] != 30000:
				return fmt.Errorf("predivide 4: mean %v, want 30000", p.Grad32[0])
			}
			return nil
		})
	}
}
