package compress_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// shapes are the test model's parameters: matrices wider than tall and
// taller than wide (PowerSGD's a is then the rows and the columns), a
// 4-dimensional one (6 rows of 2·2·3), a vector and an empty one.
var shapes = [][]int{{6, 10}, {12, 5}, {6, 2, 2, 3}, {7}, {0}}

func model(f32 bool) []*hvd.Param {
	ps := make([]*hvd.Param, len(shapes))
	for i, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		name := fmt.Sprintf("p%d", i)
		if f32 {
			ps[i] = hvd.NewParam32(name, n)
		} else {
			ps[i] = hvd.NewParam(name, n)
		}
		ps[i].Shape = s
	}
	return ps
}

// grad is rank r's gradient of parameter p at step s.
func grad(r, s, p, n int) []float64 {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(100*s+p)))
	g := make([]float64, n)
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	return g
}

// checkAverages runs steps steps of an optimizer with hook and checks,
// after each, that every parameter's gradient is the mean of the ranks'
// within tol (relative to the larger of 1 and the mean's magnitude).
func checkAverages(rt *hvd.Runtime, hook hvd.GradientHook, f32 bool, steps int, tol float64) error {
	ps := model(f32)
	sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
	if err != nil {
		return err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: hook})
	if err != nil {
		return err
	}
	for s := range steps {
		for i, p := range ps {
			g := grad(rt.Rank(), s, i, p.Len())
			if f32 {
				for j, v := range g {
					p.Grad32[j] = float32(v)
				}
			} else {
				copy(p.Grad, g)
			}
			if i%2 == 1 {
				if err := opt.GradReady(p.Name); err != nil {
					return err
				}
			}
		}
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		for i, p := range ps {
			want := make([]float64, p.Len())
			for r := range rt.Size() {
				for j, v := range grad(r, s, i, p.Len()) {
					if f32 {
						v = float64(float32(v))
					}
					want[j] += v / float64(rt.Size())
				}
			}
			for j, w := range want {
				got := 0.0
				if f32 {
					got = float64(p.Grad32[j])
				} else {
					got = p.Grad[j]
				}
				if math.Abs(got-w) > tol*max(1, math.Abs(w)) {
					return fmt.Errorf("step %d: %s[%d] is %v, want the mean %v", s, p.Name, j, got, w)
				}
			}
		}
	}
	return nil
}

// TestPowerSGDAtFullRankAverages: with r at least every gradient's a, P is
// an orthonormal basis of all of the a-dimensional space, so P·Pᵀ·M = M
// and PowerSGD is plain averaging up to rounding. The rounding: two
// passes of Gram–Schmidt leave PᵀP = I to a few ε, and P·Qᵀ adds a
// products of values below about 5 (a ≤ 12), so each result is off by
// about 12·5·ε·(a few) ≈ 1e-13 of values of order 1; the residuals that
// the next steps add are of the same size. 1e-11 is that with room. In
// float32 the factors travel as float32, so the bound is float32's ε
// times the same factor: 1e-4.
func TestPowerSGDAtFullRankAverages(t *testing.T) {
	hook := &compress.PowerSGD{Rank: 12, MinCompressionRate: 1e-9}
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
				if err := checkAverages(rt, hook, false, 3, 1e-11); err != nil {
					return err
				}
				return checkAverages(rt, hook, true, 2, 1e-4)
			})
		})
	}
}

// TestTopKOfAllAverages: with Fraction 1 every rank sends every value, and
// the sum differs from the all-reduce's only in the order of its
// additions: at most (size−1)·ε·Σ|terms| ≤ 3·2.2e-16·(4·5) ≈ 1.3e-14 for
// these gradients (values below 5, divided by the size); 1e-13.
func TestTopKOfAllAverages(t *testing.T) {
	hook := &compress.TopK{Fraction: 1}
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
				if err := checkAverages(rt, hook, false, 3, 1e-13); err != nil {
					return err
				}
				return checkAverages(rt, hook, true, 2, 1e-6)
			})
		})
	}
}

// TestErrorFeedbackLosesNothing: what the ranks' compressed forms leave
// out is in their residuals, so the results of steps steps with the same
// gradients plus the residuals left (summed over the ranks) are steps ×
// the gradients' sum. The arithmetic is in float64 over values of order
// 1; 1e-9 bounds its rounding over 4 steps with room.
func TestErrorFeedbackLosesNothing(t *testing.T) {
	const steps = 4
	for _, c := range []struct {
		hook  hvd.GradientHook
		key   string
		shape []int
	}{
		{&compress.PowerSGD{Rank: 1}, "powersgd.residual", []int{16, 24}},
		{&compress.PowerSGD{Rank: 2}, "powersgd.residual", []int{30, 2, 5}},
		{&compress.TopK{Fraction: 0.05}, "topk.residual", []int{200}},
	} {
		t.Run(fmt.Sprint(c.hook, c.shape), func(t *testing.T) {
			rts := hvdtest.Start(t, 3)
			hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
				ctx := context.Background()
				n := 1
				for _, d := range c.shape {
					n *= d
				}
				p := hvd.NewParam("w", n)
				p.Shape = c.shape
				hg, err := hvd.NewHookGradient(rt, p)
				if err != nil {
					return err
				}
				results := make([]float64, n)
				for range steps {
					copy(hg.Values, grad(rt.Rank(), 0, 0, n))
					if err := c.hook.ReduceGradient(ctx, hg); err != nil {
						return err
					}
					for i, v := range hg.Values {
						results[i] += v
					}
				}
				st, fresh := hg.State(c.key, n)
				if fresh {
					return fmt.Errorf("the hook kept no %q", c.key)
				}
				resid := append([]float64(nil), st...)
				if err := rt.Allreduce(ctx, hvd.NewTensor("resid", resid), kernels.Sum, hvd.ReduceOptions{}); err != nil {
					return err
				}
				total := make([]float64, n)
				for r := range rt.Size() {
					for i, v := range grad(r, 0, 0, n) {
						total[i] += steps * v
					}
				}
				var left float64
				for i := range total {
					d := results[i] + resid[i] - total[i]
					if math.Abs(d) > 1e-9*max(1, math.Abs(total[i])) {
						return fmt.Errorf("value %d: results %v + residuals %v, want the gradients' %v", i, results[i], resid[i], total[i])
					}
					left += math.Abs(resid[i])
				}
				if left == 0 {
					return errors.New("the residuals are all zero: the compression left nothing out")
				}
				return nil
			})
		})
	}
}

// TestPowerSGDRankOneOfRankOne: a gradient of rank 1, the same on every
// rank, is exactly what PowerSGD of rank 1 sends (in a matrix taller than
// wide and in one wider than tall), and leaves no residual.
func TestPowerSGDRankOneOfRankOne(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		for _, shape := range [][]int{{8, 20}, {20, 8}} {
			u, v := grad(9, 0, 0, shape[0]), grad(9, 0, 1, shape[1])
			p := hvd.NewParam(fmt.Sprint("m", shape), shape[0]*shape[1])
			p.Shape = shape
			hg, err := hvd.NewHookGradient(rt, p)
			if err != nil {
				return err
			}
			for i := range shape[0] {
				for j := range shape[1] {
					hg.Values[i*shape[1]+j] = u[i] * v[j]
				}
			}
			if err := (&compress.PowerSGD{Rank: 1}).ReduceGradient(context.Background(), hg); err != nil {
				return err
			}
			resid, _ := hg.State("powersgd.residual", len(hg.Values))
			for k, x := range hg.Values {
				want := 2 * u[k/shape[1]] * v[k%shape[1]]
				if math.Abs(x-want) > 1e-12*max(1, math.Abs(want)) || math.Abs(resid[k]) > 1e-12 {
					return fmt.Errorf("%v: value %d is %v with residual %v, want %v and none", shape, k, x, resid[k], want)
				}
			}
		}
		return nil
	})
}

// TestTopKSendsK: each rank sends its k largest magnitudes, so the sum has
// at most size·k values other than zero and each rank keeps the rest.
func TestTopKSendsK(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		const n, k = 100, 4
		p := hvd.NewParam("v", n)
		hg, err := hvd.NewHookGradient(rt, p)
		if err != nil {
			return err
		}
		g := grad(rt.Rank(), 0, 0, n)
		copy(hg.Values, g)
		if err := (&compress.TopK{Fraction: 0.04}).ReduceGradient(context.Background(), hg); err != nil {
			return err
		}
		nonzero := 0
		for _, v := range hg.Values {
			if v != 0 {
				nonzero++
			}
		}
		if nonzero == 0 || nonzero > 3*k {
			return fmt.Errorf("%d values of the sum are not zero, want 1 to %d", nonzero, 3*k)
		}
		resid, _ := hg.State("topk.residual", n)
		var smallestSent, largestKept float64 = math.Inf(1), 0
		sent := 0
		for i, r := range resid {
			if r == 0 {
				sent++
				smallestSent = min(smallestSent, math.Abs(g[i]))
			} else {
				largestKept = max(largestKept, math.Abs(r))
			}
		}
		if sent != k || smallestSent < largestKept {
			return fmt.Errorf("sent %d values, the smallest %v, and kept one of %v: want the %d largest sent", sent, smallestSent, largestKept, k)
		}
		return nil
	})
}

// TestPowerSGDWithJoin: while a rank has joined, the others' PowerSGD
// all-reduces count it as zeros, and the average still divides by the
// whole job's size, as plain averaging does.
func TestPowerSGDWithJoin(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ctx := context.Background()
		if rt.Rank() == 1 {
			_, err := rt.Join(ctx)
			return err
		}
		ps := model(false)
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: &compress.PowerSGD{Rank: 12, MinCompressionRate: 1e-9}})
		if err != nil {
			return err
		}
		for i, p := range ps {
			copy(p.Grad, grad(0, 0, i, p.Len()))
		}
		if err := opt.Step(ctx); err != nil {
			return err
		}
		for i, p := range ps {
			for j, v := range grad(0, 0, i, p.Len()) {
				if math.Abs(p.Grad[j]-v/2) > 1e-11 {
					return fmt.Errorf("%s[%d] is %v, want %v", p.Name, j, p.Grad[j], v/2)
				}
			}
		}
		_, err = rt.Join(ctx)
		return err
	})
}

// TestWarmupSendsWhole: during WarmupSteps a gradient is all-reduced whole
// (the exact sum, no residual); the step after, it is compressed.
func TestWarmupSendsWhole(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		for _, c := range []struct {
			hook hvd.GradientHook
			key  string
		}{
			{&compress.PowerSGD{Rank: 1, WarmupSteps: 2}, "powersgd.residual"},
			{&compress.TopK{Fraction: 0.1, WarmupSteps: 2}, "topk.residual"},
		} {
			p := hvd.NewParam("w", 60)
			p.Shape = []int{6, 10}
			hg, err := hvd.NewHookGradient(rt, p)
			if err != nil {
				return err
			}
			for s := range 3 {
				copy(hg.Values, grad(rt.Rank(), s, 0, 60))
				if err := c.hook.ReduceGradient(context.Background(), hg); err != nil {
					return err
				}
				exact := true
				for i, v := range hg.Values {
					want := grad(0, s, 0, 60)[i] + grad(1, s, 0, 60)[i]
					exact = exact && math.Abs(v-want) < 1e-12
				}
				if exact != (s < 2) {
					return fmt.Errorf("%v step %d: sum exact %v, want %v", c.hook, s, exact, s < 2)
				}
			}
		}
		return nil
	})
}

// TestTopKWithJoinFails: an all-gather cannot run while a rank has joined,
// so a top-k step then fails with hvd.ErrJoined (as documented), and the
// job goes on: the rank joins too.
func TestTopKWithJoinFails(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ctx := context.Background()
		if rt.Rank() == 1 {
			_, err := rt.Join(ctx)
			return err
		}
		ps := model(false)
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: &compress.TopK{Fraction: 0.5}})
		if err != nil {
			return err
		}
		if err := opt.Step(ctx); !errors.Is(err, hvd.ErrJoined) {
			return fmt.Errorf("top-k step beside a joined rank: got %v, want ErrJoined", err)
		}
		_, err = rt.Join(ctx)
		return err
	})
}
