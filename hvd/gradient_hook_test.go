package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// plainHook all-reduces each gradient whole through the hook machinery:
// the identity of hooks. It counts its calls per gradient in the
// gradient's state, and reports the count it saw (1 on the first step
// after a binding) to seen.
type plainHook struct {
	seen func(name string, count float64)
}

func (h plainHook) ReduceGradient(ctx context.Context, g *hvd.HookGradient) error {
	c, _ := g.State("calls", 1)
	c[0]++
	if h.seen != nil {
		h.seen(g.Name, c[0])
	}
	return g.Allreduce(ctx, "", g.Values)
}

// hidden hides a hook's type (a Compression's fast path).
type hidden struct{ hvd.GradientHook }

// dyadic is a gradient of n multiples of 1/1024 below 2^10 in magnitude:
// any sum of a few of them, in any order, is exact in float32 and float64.
func dyadic(seed uint64, n int) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	g := make([]float64, n)
	for i := range g {
		g[i] = float64(rng.IntN(1<<20)-1<<19) / 1024
	}
	return g
}

// awayFromZero is a gradient of n values of magnitude in [0.5, 1.5).
func awayFromZero(seed uint64, n int) []float64 {
	rng := rand.New(rand.NewPCG(seed, 8))
	g := make([]float64, n)
	for i := range g {
		g[i] = (0.5 + rng.Float64()) * float64(1-2*rng.IntN(2))
	}
	return g
}

// train runs steps steps of passes backward passes of SGD (momentum 0.9)
// over a fresh model, with the gradients grad(rank, step, pass, param, n)
// (half reported by GradReady, the rest left to Step), and returns the
// parameters' values.
func train(rt *hvd.Runtime, model int, opts hvd.DistributedOptions, steps int, grad func(r, s, k, p, n int) []float64) ([][]float64, error) {
	ps := paramsOf(model)
	sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.25, Momentum: 0.5})
	if err != nil {
		return nil, err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, opts)
	if err != nil {
		return nil, err
	}
	passes := opt.Options().BackwardPassesPerStep
	for s := range steps {
		for k := range passes {
			for p := len(ps) - 1; p >= 0; p-- {
				setGrad(ps[p], grad(rt.Rank(), s, k, p, ps[p].Len()))
				if p%2 == 0 {
					if err := opt.GradReady(ps[p].Name); err != nil {
						return nil, err
					}
				}
			}
			if err := opt.Step(context.Background()); err != nil {
				return nil, err
			}
		}
	}
	out := make([][]float64, len(ps))
	for i, p := range ps {
		for j := range p.Len() {
			_, v := at(p, j)
			out[i] = append(out[i], v)
		}
	}
	return out, nil
}

// TestIdentityHookChangesNothing: a hook that all-reduces each gradient
// whole gives the same parameters, bit for bit, as no hook, with fusion
// (the default threshold fuses the step's all-reduces) and with several
// backward passes a step. At 3 and 4 ranks the ring's order of additions
// depends on how the engine happened to fuse (timing), so those cases sum
// dyadic gradients, whose sums are exact in any order; at 1 and 2 ranks
// (a+b is b+a) any gradients do.
func TestIdentityHookChangesNothing(t *testing.T) {
	normal := func(r, s, k, p, n int) []float64 { return rankGrad(r, p, 10*s+k, n) }
	exact := func(r, s, k, p, n int) []float64 { return dyadic(uint64(1000*r+100*s+10*k+p), n) }
	cases := []struct {
		ranks  int
		opts   hvd.DistributedOptions
		models []int
		grad   func(r, s, k, p, n int) []float64
	}{
		{1, hvd.DistributedOptions{}, []int{float64Model, float32Model}, normal},
		{1, hvd.DistributedOptions{BackwardPassesPerStep: 3}, []int{float64Model}, normal},
		{2, hvd.DistributedOptions{}, []int{float64Model, float32Model, mixedModel}, normal},
		{2, hvd.DistributedOptions{BackwardPassesPerStep: 3}, []int{float64Model, mixedModel}, normal},
		{2, hvd.DistributedOptions{Op: kernels.Sum, BackwardPassesPerStep: 2}, []int{float32Model}, normal},
		{3, hvd.DistributedOptions{Op: kernels.Sum}, []int{float64Model, float32Model}, exact},
		{3, hvd.DistributedOptions{Op: kernels.Sum, BackwardPassesPerStep: 2}, []int{mixedModel}, exact},
		{4, hvd.DistributedOptions{}, []int{float64Model, mixedModel}, exact},
		{4, hvd.DistributedOptions{BackwardPassesPerStep: 2}, []int{float32Model}, exact},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("np%d/%v/passes%d", c.ranks, c.opts.Op, c.opts.BackwardPassesPerStep), func(t *testing.T) {
			rts := hvdtest.Start(t, c.ranks)
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				for _, m := range c.models {
					want, err := train(rt, m, c.opts, 3, c.grad)
					if err != nil {
						return err
					}
					hooked := c.opts
					hooked.Hook = plainHook{}
					got, err := train(rt, m, hooked, 3, c.grad)
					if err != nil {
						return err
					}
					if err := sameBits(got, want); err != nil {
						return fmt.Errorf("model %d: %w", m, err)
					}
				}
				return nil
			})
		})
	}
}

// sameBits says where got and want differ in any bit.
func sameBits(got, want [][]float64) error {
	for i := range want {
		for j := range want[i] {
			if math.Float64bits(got[i][j]) != math.Float64bits(want[i][j]) {
				return fmt.Errorf("parameter %d[%d] is %v, without the hook %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	return nil
}

// TestCompressionIsAHook: a Compression given as the Hook takes its fast
// path (Options reports it as the Compression, with the same results),
// and run through the general hook path instead it gives the same
// parameters bit for bit. (At 2 ranks, with gradients away from zero,
// dividing by the size before or after the rounded sum is exact both
// ways, so the two paths' different scaling orders agree.)
func TestCompressionIsAHook(t *testing.T) {
	grad := func(r, s, k, p, n int) []float64 { return awayFromZero(uint64(100*r+10*s+p), n) }
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		for _, c := range []hvd.Compression{hvd.NoCompression, hvd.FP32Compression, hvd.FP16Compression, hvd.BF16Compression} {
			for _, m := range []int{float64Model, float32Model} {
				want, err := train(rt, m, hvd.DistributedOptions{Compression: c}, 2, grad)
				if err != nil {
					return err
				}
				fast, err := train(rt, m, hvd.DistributedOptions{Hook: c}, 2, grad)
				if err != nil {
					return err
				}
				general, err := train(rt, m, hvd.DistributedOptions{Hook: hidden{c}}, 2, grad)
				if err != nil {
					return err
				}
				if err := sameBits(fast, want); err != nil {
					return fmt.Errorf("%v as Hook, model %d: %w", c, m, err)
				}
				if err := sameBits(general, want); err != nil {
					return fmt.Errorf("%v through the hook path, model %d: %w", c, m, err)
				}
			}
		}
		return nil
	})
}

func TestHookOptionsRejected(t *testing.T) {
	rts := hvdtest.Start(t, 1)
	for _, o := range []hvd.DistributedOptions{
		{Hook: plainHook{}, Op: kernels.Adasum},
		{Hook: plainHook{}, Compression: hvd.FP16Compression},
		{Hook: plainHook{}, GradientPredivideFactor: 2},
		{Hook: hvd.FP16Compression, Compression: hvd.BF16Compression},
	} {
		sgd, _ := hvd.NewSGD(params(), hvd.SGDConfig{LR: 1})
		if _, err := hvd.NewDistributedOptimizer(sgd, rts[0], o); !errors.Is(err, hvd.ErrInvalidArgument) {
			t.Errorf("%+v: got %v, want ErrInvalidArgument", o, err)
		}
	}
	sgd, _ := hvd.NewSGD(params(), hvd.SGDConfig{LR: 1})
	opt, err := hvd.NewDistributedOptimizer(sgd, rts[0], hvd.DistributedOptions{Hook: hvd.FP16Compression})
	if err != nil {
		t.Fatal(err)
	}
	if o := opt.Options(); o.Compression != hvd.FP16Compression || o.Hook != nil {
		t.Errorf("FP16Compression as Hook: options %+v, want it as the Compression", o)
	}
	if _, err := hvd.NewHookGradient(rts[0], &hvd.Param{Name: "m", Value: make([]float64, 6), Grad: make([]float64, 6), Shape: []int{4, 2}}); !errors.Is(err, hvd.ErrInvalidParam) {
		t.Errorf("shape 4×2 of 6 values: got %v, want ErrInvalidParam", err)
	}
}

// failingHook fails every exchange of one gradient.
type failingHook struct{ name string }

var errHook = errors.New("the hook failed")

func (h failingHook) ReduceGradient(ctx context.Context, g *hvd.HookGradient) error {
	if g.Name == h.name {
		return errHook
	}
	return g.Allreduce(ctx, "", g.Values)
}

func TestHookErrorEndsStep(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := params()
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: failingHook{"layer3"}})
		if err != nil {
			return err
		}
		if err := opt.Step(context.Background()); !errors.Is(err, errHook) {
			return fmt.Errorf("step: got %v, want the hook's error", err)
		}
		return nil
	})
}

// TestHookStateResetsOnNewFormation: the state of a gradient lives as long
// as the optimizer's binding to a job; an elastic job's new formation (a
// job of 3 ranks after one of 2, as RunElastic binds it) starts every
// gradient's state anew, on the ranks that were there and on the one that
// joined alike.
func TestHookStateResetsOnNewFormation(t *testing.T) {
	type rankState struct {
		ps  []*hvd.Param
		opt *hvd.DistributedOptimizer
		st  *hvd.ElasticState
	}
	counts := make([][]float64, 3) // per rank, layer0's call count seen each step
	newRank := func(r int, rt *hvd.Runtime) (*rankState, error) {
		ps := params()
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		hook := plainHook{seen: func(name string, c float64) {
			if name == "layer0" {
				counts[r] = append(counts[r], c)
			}
		}}
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: hook})
		if err != nil {
			return nil, err
		}
		st, err := hvd.NewElasticState(opt)
		return &rankState{ps, opt, st}, err
	}
	steps := func(s *rankState, n int) error {
		for range n {
			if err := s.opt.Step(context.Background()); err != nil {
				return err
			}
		}
		return s.st.Commit()
	}
	old := hvdtest.Start(t, 2)
	states := make([]*rankState, 3)
	each(t, old, func(r int, rt *hvd.Runtime) (err error) {
		if states[r], err = newRank(r, rt); err != nil {
			return err
		}
		return steps(states[r], 3)
	})
	formed := hvdtest.Start(t, 3)
	each(t, formed, func(r int, rt *hvd.Runtime) (err error) {
		if r == 2 {
			states[r], err = newRank(r, rt)
		} else {
			states[r].st.Attach(rt)
		}
		if err != nil {
			return err
		}
		return steps(states[r], 2)
	})
	want := [][]float64{{1, 2, 3, 1, 2}, {1, 2, 3, 1, 2}, {1, 2}}
	for r := range want {
		if !slices.Equal(counts[r], want[r]) {
			t.Errorf("rank %d saw the counts %v, want %v", r, counts[r], want[r])
		}
	}
}

// TestHookStepEndsWithContext: a Step whose context ends while its hooks
// wait for a rank that has not stepped yet returns the context's error
// (its hooks' waits end with it); once the other rank steps, the
// abandoned all-reduces complete and nothing is left running.
func TestHookStepEndsWithContext(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	stepped := make(chan struct{})
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ps := params()
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Hook: plainHook{}})
		if err != nil {
			return err
		}
		if r == 1 {
			<-stepped
			return opt.Step(context.Background())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = opt.Step(ctx)
		close(stepped)
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("step: got %v, want the context's deadline", err)
		}
		return nil
	})
}

// TestRunElasticWithHook: a job whose optimizer exchanges its gradients
// through a hook loses one of three workers; the two others re-form, and
// RunElastic's new binding starts the hook's state anew on each (the
// count of calls it keeps goes back to 1), and the job still processes
// every sample exactly once.
func TestRunElasticWithHook(t *testing.T) {
	j := newElasticJob(t)
	var mu sync.Mutex
	counts := map[string][]float64{}
	j.hook = func(w *elasticWorker) hvd.GradientHook {
		return plainHook{seen: func(_ string, c float64) {
			mu.Lock()
			counts[w.id] = append(counts[w.id], c)
			mu.Unlock()
		}}
	}
	killed := make(chan struct{})
	var once sync.Once
	onStep := func(ctx context.Context, w *elasticWorker, rank, size, steps int) {
		if size == 3 && steps == 5 && w.id == "w2" {
			once.Do(func() { close(killed) })
			<-ctx.Done()
		}
	}
	for _, id := range []string{"w0", "w1", "w2"} {
		j.start(id, onStep)
	}
	j.publish("w0", "w1", "w2")
	<-killed
	j.kill("w2")
	j.publish("w0", "w1")
	j.wantSums("w0", "w1")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"w0", "w1"} {
		c := counts[id]
		restarts := 0
		for i := 1; i < len(c); i++ {
			switch {
			case c[i] == 1:
				restarts++
			case c[i] != c[i-1]+1:
				t.Fatalf("worker %s: the hook's counts %v skip", id, c)
			}
		}
		if c[0] != 1 || restarts != 1 {
			t.Errorf("worker %s: the hook's state started anew %d times after the first binding (counts %v), want once", id, restarts, c)
		}
	}
}
