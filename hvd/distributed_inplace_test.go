package hvd_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestDistributedInPlace: with InPlace, gradients that travel in their own
// type are all-reduced in Grad itself, and two steps give parameters and
// gradients equal bit for bit to those without it; compressed gradients
// and accumulated passes fall back to copies, with the same results.
func TestDistributedInPlace(t *testing.T) {
	cases := []struct {
		name    string
		opts    hvd.DistributedOptions
		model   int
		inPlace int // gradients all-reduced in place
	}{
		{"float64 avg", hvd.DistributedOptions{}, float64Model, len(paramSizes)},
		{"float64 sum", hvd.DistributedOptions{Op: kernels.Sum}, float64Model, len(paramSizes)},
		{"float32", hvd.DistributedOptions{}, float32Model, len(paramSizes)},
		{"mixed", hvd.DistributedOptions{}, mixedModel, len(paramSizes)},
		{"mixed, fp32", hvd.DistributedOptions{Compression: hvd.FP32Compression}, mixedModel, len(paramSizes) / 2},
		{"fp16", hvd.DistributedOptions{Compression: hvd.FP16Compression}, float64Model, 0},
		{"predivide, fp16", hvd.DistributedOptions{Compression: hvd.FP16Compression, GradientPredivideFactor: 2}, float64Model, 0},
		{"2 passes", hvd.DistributedOptions{BackwardPassesPerStep: 2}, float64Model, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rts := hvdtest.Start(t, 3)
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				copied, err := stepTwice(rt, c.model, c.opts, "copied/", -1)
				if err != nil {
					return err
				}
				o := c.opts
				o.InPlace = true
				inPlace, err := stepTwice(rt, c.model, o, "inplace/", c.inPlace)
				if err != nil {
					return err
				}
				for p := range copied {
					for i := range copied[p] {
						if math.Float64bits(copied[p][i]) != math.Float64bits(inPlace[p][i]) {
							return fmt.Errorf("param %d value %d: %v in place, %v copied", p, i, inPlace[p][i], copied[p][i])
						}
					}
				}
				return nil
			})
		})
	}
}

// stepTwice runs two SGD steps with momentum of every pass of opts over a
// fresh model whose parameters are named with prefix, reporting the
// gradients as a backward pass does and leaving them alone until Step.
// It checks that wantInPlace gradients are all-reduced in place (unless
// negative) and returns the parameters' values and gradients.
func stepTwice(rt *hvd.Runtime, model int, opts hvd.DistributedOptions, prefix string, wantInPlace int) ([][]float64, error) {
	ps := paramsOf(model)
	for _, p := range ps {
		p.Name = prefix + p.Name
	}
	sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.5, Momentum: 0.9})
	if err != nil {
		return nil, err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, opts)
	if err != nil {
		return nil, err
	}
	if got := opt.InPlaceGrads(); wantInPlace >= 0 && got != wantInPlace {
		return nil, fmt.Errorf("%d gradients all-reduced in place, want %d", got, wantInPlace)
	}
	passes := max(opts.BackwardPassesPerStep, 1)
	for step := range 2 {
		for k := range passes {
			for p := len(ps) - 1; p >= 0; p-- {
				setGrad(ps[p], rankGrad(rt.Rank(), p, step*passes+k, ps[p].Len()))
				if err := opt.GradReady(ps[p].Name); err != nil {
					return nil, err
				}
			}
			if err := opt.Step(context.Background()); err != nil {
				return nil, err
			}
		}
	}
	out := make([][]float64, len(ps))
	for p, param := range ps {
		for i := range param.Len() {
			g, v := at(param, i)
			out[p] = append(out[p], g, v)
		}
	}
	return out, nil
}
