package hvdgomlx_test

import (
	stdctx "context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/metrics"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	hvdgomlx "github.com/gorovod/gorovod/frameworks/gomlx"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

const (
	inDim, hidden, perRank, steps = 6, 5, 4, 5
	// sgdTolerance bounds |w - w_ref| for plain SGD against one process
	// over the concatenated batch: float32 sums in another order.
	sgdTolerance = 1e-5
)

var (
	backendOnce sync.Once
	backend     backends.Backend
)

// theBackend is one simplego backend for every rank and reference run. Its
// operations run one at a time: simplego's parallel operation scheduler
// (v0.26.0, exec.go) reads its results table outside the lock that guards
// its writes, which the race detector reports.
func theBackend() backends.Backend {
	backendOnce.Do(func() {
		var err error
		if backend, err = simplego.New("ops_sequential"); err != nil {
			panic(err)
		}
	})
	return backend
}

// model is a small MLP with GoMLX's own layers.
func model(ctx *context.Context, _ any, inputs []*graph.Node) []*graph.Node {
	x := layers.DenseWithBias(ctx.In("dense0"), inputs[0], hidden)
	x = graph.Tanh(x)
	return []*graph.Node{layers.DenseWithBias(ctx.In("dense1"), x, 1)}
}

// batch returns the examples [from, from+n) of a fixed synthetic regression set.
func batch(from, n int) (x, y *tensors.Tensor) {
	xs := make([]float32, n*inDim)
	ys := make([]float32, n)
	for i := range n {
		e := from + i
		var sum float64
		for j := range inDim {
			v := float32(math.Sin(float64(e*inDim+j) * 0.37))
			xs[i*inDim+j] = v
			sum += float64(v) * float64(j%3-1)
		}
		ys[i] = float32(math.Tanh(sum))
	}
	return tensors.FromFlatDataAndDimensions(xs, n, inDim), tensors.FromFlatDataAndDimensions(ys, n, 1)
}

// newContext returns a context whose variables initialize from seed.
func newContext(seed int64) *context.Context {
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, seed)
	return ctx
}

// values returns every variable of ctx (but the gradients and the random
// state) by scope and name.
func values(ctx *context.Context) map[string][]float32 {
	out := map[string][]float32{}
	for v := range ctx.IterVariables() {
		if v.Name() == context.RNGStateVariableName || strings.HasPrefix(v.Scope(), hvdgomlx.GradientsScope) ||
			strings.HasPrefix(v.Scope(), "/"+metrics.Scope) {
			continue
		}
		t := v.MustValue()
		switch t.DType().String() {
		case "Float32":
			out[v.ScopeAndName()] = tensors.MustCopyFlatData[float32](t)
		case "Int64":
			for _, s := range tensors.MustCopyFlatData[int64](t) {
				out[v.ScopeAndName()] = append(out[v.ScopeAndName()], float32(s))
			}
		}
	}
	return out
}

// repeat is a train.Dataset that yields the same batch forever.
type repeat struct{ x, y *tensors.Tensor }

func (d *repeat) Name() string { return "repeat" }
func (d *repeat) Reset()       {}
func (d *repeat) Yield() (any, []*tensors.Tensor, []*tensors.Tensor, error) {
	if d.x == nil {
		return nil, nil, nil, io.EOF
	}
	return nil, []*tensors.Tensor{d.x}, []*tensors.Tensor{d.y}, nil
}
func (d *repeat) IsOwnershipTransferred() bool { return false }

// trainRanks trains np ranks for steps steps, rank r on examples
// [r*perRank, (r+1)*perRank) and its variables initialized from seed 100+r,
// and returns each rank's variables afterwards.
func trainRanks(t *testing.T, np int, newOpt func() optimizers.Interface, useLoop bool) []map[string][]float32 {
	t.Helper()
	out := make([]map[string][]float32, np)
	rts := hvdtest.Start(t, np)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		r := rt.Rank()
		ctx := newContext(int64(100 + r))
		opt, err := hvdgomlx.New(rt, theBackend(), newOpt())
		if err != nil {
			return err
		}
		trainer := train.NewTrainer(theBackend(), ctx, model, losses.MeanSquaredError, opt, nil, nil)
		x, y := batch(r*perRank, perRank)
		if useLoop {
			loop := train.NewLoop(trainer)
			opt.Attach(loop)
			if _, err := loop.RunSteps(&repeat{x, y}, steps); err != nil {
				return err
			}
		} else {
			for range steps {
				if _, err := trainer.TrainStep(nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}); err != nil {
					return err
				}
				if err := opt.Step(stdctx.Background()); err != nil {
					return err
				}
			}
		}
		out[r] = values(trainer.Context())
		return nil
	})
	return out
}

// sameOnAllRanks fails t unless every rank holds rank 0's variables, bit for bit.
func sameOnAllRanks(t *testing.T, vals []map[string][]float32) {
	t.Helper()
	if len(vals[0]) == 0 {
		t.Fatal("rank 0 has no variables")
	}
	for r := 1; r < len(vals); r++ {
		if len(vals[r]) != len(vals[0]) {
			t.Fatalf("rank %d has %d variables, rank 0 %d", r, len(vals[r]), len(vals[0]))
		}
		for name, want := range vals[0] {
			got := vals[r][name]
			if len(got) != len(want) {
				t.Fatalf("rank %d: %s has %d values, rank 0 %d", r, name, len(got), len(want))
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("rank %d: %s[%d] = %v, rank 0 has %v", r, name, i, got[i], want[i])
				}
			}
		}
	}
}

func sgd() optimizers.Interface {
	return optimizers.StochasticGradientDescent().WithDecay(false).WithLearningRate(0.2)
}

func adam() optimizers.Interface { return optimizers.Adam().LearningRate(0.05).Done() }

// reference trains GoMLX's own optimizer, unwrapped, in one process over the
// concatenated batches of np ranks, from rank 0's initial variables.
func reference(t *testing.T, np int, opt optimizers.Interface) map[string][]float32 {
	t.Helper()
	ctx := newContext(100)
	trainer := train.NewTrainer(theBackend(), ctx, model, losses.MeanSquaredError, opt, nil, nil)
	x, y := batch(0, np*perRank)
	for range steps {
		if _, err := trainer.TrainStep(nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}); err != nil {
			t.Fatal(err)
		}
	}
	return values(trainer.Context())
}

func TestSGDMatchesOneProcessOverConcatenatedBatch(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			vals := trainRanks(t, np, sgd, false)
			sameOnAllRanks(t, vals)
			ref := reference(t, np, sgd())
			start := values(initialOnly(t))
			moved := false
			for name, want := range ref {
				got := vals[0][name]
				if len(got) != len(want) {
					t.Fatalf("%s: %d values, reference %d", name, len(got), len(want))
				}
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > sgdTolerance {
						t.Fatalf("%s[%d] = %v, one process over the concatenated batch %v (|d| = %g > %g)",
							name, i, got[i], want[i], d, sgdTolerance)
					}
					if s, ok := start[name]; ok && s[i] != want[i] {
						moved = true
					}
				}
			}
			if !moved {
				t.Fatal("training did not change the variables")
			}
		})
	}
}

// initialOnly returns a context holding rank 0's initial variables.
func initialOnly(t *testing.T) *context.Context {
	t.Helper()
	ctx := newContext(100)
	e, err := context.NewExec(theBackend(), ctx, func(ctx *context.Context, x *graph.Node) *graph.Node {
		return model(ctx, nil, []*graph.Node{x})[0]
	})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := batch(0, 1)
	if _, err := e.Exec(x); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func TestAdamIdenticalOnAllRanks(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			vals := trainRanks(t, np, adam, true)
			sameOnAllRanks(t, vals)
			if np == 1 {
				// One rank: the wrapped Adam is GoMLX's Adam, step for step.
				ref := reference(t, 1, adam())
				for name, want := range ref {
					for i := range want {
						if d := math.Abs(float64(vals[0][name][i] - want[i])); d > sgdTolerance {
							t.Fatalf("%s[%d] = %v, GoMLX's own Adam %v", name, i, vals[0][name][i], want[i])
						}
					}
				}
			}
		})
	}
}

// A per-step update hook (train.AddPerStepUpdateGraphFn) runs after the
// averaged update, as in GoMLX's own step: a hook that clips the output
// layer's weights leaves them clipped after every step.
func TestPerStepUpdateHookRunsAfterTheUpdate(t *testing.T) {
	const limit = 0.05
	clipped := func(ctx *context.Context, spec any, inputs []*graph.Node) []*graph.Node {
		out := model(ctx, spec, inputs)
		train.AddPerStepUpdateGraphFn(ctx.In("clip"), out[0].Graph(), func(ctx *context.Context, g *graph.Graph) {
			w := ctx.InAbsPath("/dense1/dense").GetVariable("weights")
			w.SetValueGraph(graph.ClipScalar(w.ValueGraph(g), -limit, limit))
		})
		return out
	}
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		opt, err := hvdgomlx.New(rt, theBackend(), optimizers.StochasticGradientDescent().WithDecay(false).WithLearningRate(1))
		if err != nil {
			return err
		}
		trainer := train.NewTrainer(theBackend(), newContext(int64(rt.Rank())), clipped, losses.MeanSquaredError, opt, nil, nil)
		x, y := batch(rt.Rank()*perRank, perRank)
		for range steps {
			if _, err := trainer.TrainStep(nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}); err != nil {
				return err
			}
			if err := opt.Step(stdctx.Background()); err != nil {
				return err
			}
			w := tensors.MustCopyFlatData[float32](trainer.Context().InAbsPath("/dense1/dense").GetVariable("weights").MustValue())
			for i, v := range w {
				if v < -limit || v > limit {
					return fmt.Errorf("after a step, weights[%d] = %v, outside the hook's clip to ±%v", i, v, limit)
				}
			}
		}
		return nil
	})
}

// After Clear and Trainer.ResetComputationGraphs, training goes on: the
// variables are broadcast again and stay identical on every rank.
func TestClearThenTrainAgain(t *testing.T) {
	out := make([]map[string][]float32, 2)
	rts := hvdtest.Start(t, 2)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		opt, err := hvdgomlx.New(rt, theBackend(), adam())
		if err != nil {
			return err
		}
		trainer := train.NewTrainer(theBackend(), newContext(int64(rt.Rank())), model, losses.MeanSquaredError, opt, nil, nil)
		x, y := batch(rt.Rank()*perRank, perRank)
		for round := range 2 {
			for range 2 {
				if _, err := trainer.TrainStep(nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
				if err := opt.Step(stdctx.Background()); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
			if round == 0 {
				if err := opt.Clear(trainer.Context()); err != nil {
					return err
				}
				trainer.ResetComputationGraphs()
				trainer.SetContext(trainer.Context().Reuse())
			}
		}
		out[rt.Rank()] = values(trainer.Context())
		return nil
	})
	sameOnAllRanks(t, out)
}
