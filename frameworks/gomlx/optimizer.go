package hvdgomlx

import (
	stdctx "context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/gorovod/gorovod/hvd"
)

// GradientsScope is the absolute context scope under which the Optimizer
// keeps each rank's gradients between the train step and the update (one
// non-trainable variable per trainable variable, at the same scope and name
// below it).
const GradientsScope = "/hvd_gradients"

// StepPriority is the train.Loop OnStep priority of the hook that Attach
// registers: lower than any other hook's, so every other hook (checkpoints,
// evaluations, plots) sees the variables after the averaged update.
const StepPriority train.Priority = math.MinInt32

// Optimizer makes a GoMLX optimizer train data-parallel across the ranks of
// a gorovod job. It implements optimizers.Interface, so it goes where the
// wrapped optimizer went, in train.NewTrainer.
//
// A train step becomes two executions on the backend with one all-reduce
// between them on the host. The Trainer's train graph (through UpdateGraph)
// computes this rank's gradients and stores them in variables under
// GradientsScope instead of updating the model. Step, called after each
// Trainer.TrainStep (Attach does that for a train.Loop), averages those
// gradients across the ranks with one fused all-reduce per dtype, then runs
// a second graph in which the wrapped optimizer applies the averaged
// gradients (its UpdateGraphWithGradients, as GoMLX's own gradient
// accumulation does). GoMLX graphs run inside the backend, which has no
// operation that calls back into Go in the middle of a graph, and the
// simplego backend implements no collective operations; so the all-reduce
// sits between two graphs.
//
// The first time the Trainer builds its train graph, UpdateGraph
// initializes the model's variables and broadcasts them from rank 0, before
// the first step runs; the first Step does the same for the variables the
// wrapped optimizer creates (its state, the global step), so a rank 0
// restored from a checkpoint brings the others with it. The context's
// random-number state is not broadcast, so dropout differs across ranks.
//
// Every rank must build the same train graphs in the same order (the same
// batch shapes), and every train graph must use the same trainable
// variables. Hooks registered with train.AddPerStepUpdateGraphFn are moved
// to the update graph, so they run after the averaged update as in GoMLX's
// own step; they must only use variables, not nodes of the train graph.
type Optimizer struct {
	rt      *hvd.Runtime
	backend backends.Backend
	inner   optimizers.Interface
	with    train.OptimizeWithGradients

	mu        sync.Mutex
	ctx       *context.Context // the trainer's context, unchecked
	vars      []*context.Variable
	grads     []*context.Variable
	lossDType dtypes.DType
	hooks     []scopedHook
	synced    map[string]bool // variables broadcast from the root
	apply     *context.Exec
	fused     map[dtypes.DType][]byte // the all-reduce buffer of each dtype
}

// scopedHook is a per-step update function and the scope it was registered in.
type scopedHook struct {
	scope string
	fn    train.ContextGraphFn
}

// New wraps opt, which must implement train.OptimizeWithGradients (GoMLX's
// SGD, Adam, RMSProp, AdamW and Adamax do), for the ranks of rt. backend is
// the Trainer's backend: the Optimizer runs its update graph and the
// variables' initialization on it.
func New(rt *hvd.Runtime, backend backends.Backend, opt optimizers.Interface) (*Optimizer, error) {
	if rt == nil || backend == nil || opt == nil {
		return nil, errors.New("hvdgomlx: New needs a runtime, a backend and an optimizer")
	}
	with, ok := opt.(train.OptimizeWithGradients)
	if !ok {
		return nil, fmt.Errorf("hvdgomlx: optimizer %T does not implement train.OptimizeWithGradients", opt)
	}
	return &Optimizer{rt: rt, backend: backend, inner: opt, with: with,
		synced: map[string]bool{}, fused: map[dtypes.DType][]byte{}}, nil
}

// UpdateGraph implements optimizers.Interface: it builds the gradients of
// loss with respect to the trainable variables and stores them under
// GradientsScope; the variables themselves change in Step. The first
// call initializes the variables and broadcasts them from rank 0.
func (o *Optimizer) UpdateGraph(ctx *context.Context, g *graph.Graph, loss *graph.Node) {
	if !loss.Shape().IsScalar() {
		panic(fmt.Errorf("hvdgomlx: the loss must be a scalar, got shape %s", loss.Shape()))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ctx = ctx.Checked(false)
	var vars []*context.Variable
	for v := range ctx.IterVariables() {
		if v.Trainable && v.InUseByGraph(g) {
			vars = append(vars, v)
		}
	}
	if len(vars) == 0 {
		panic(errors.New("hvdgomlx: the train graph uses no trainable variable"))
	}
	if o.vars != nil && !slices.Equal(o.vars, vars) {
		panic(fmt.Errorf("hvdgomlx: this train graph uses %d trainable variables, an earlier one %d others: "+
			"every train graph must use the same trainable variables", len(vars), len(o.vars)))
	}
	if o.ctx == nil {
		o.ctx = ctx
		if err := o.sync(); err != nil {
			panic(err)
		}
	}
	grads := ctx.BuildTrainableVariablesGradientsGraph(loss)
	if len(grads) != len(vars) {
		panic(fmt.Errorf("hvdgomlx: %d gradients for %d trainable variables", len(grads), len(vars)))
	}
	gradVars := make([]*context.Variable, len(vars))
	for i, v := range vars {
		gv := ctx.InAbsPath(GradientsScope+v.Scope()).WithInitializer(initializers.Zero).
			VariableWithShape(v.Name(), grads[i].Shape()).SetTrainable(false)
		gv.SetValueGraph(grads[i])
		gradVars[i] = gv
	}
	o.vars, o.grads, o.lossDType = vars, gradVars, loss.DType()
	o.moveHooks(ctx, g)
}

// moveHooks takes the per-step update functions registered in g out of the
// train graph (the Trainer runs them after UpdateGraph, before the averaged
// update exists) and keeps them for the update graph.
func (o *Optimizer) moveHooks(ctx *context.Context, g *graph.Graph) {
	var hooks []scopedHook
	ctx.EnumerateGraphParams(g, func(scope, key string, value any) {
		if key != train.TrainerPerStepUpdateGraphFnParamKey {
			return
		}
		if fn, ok := value.(train.ContextGraphFn); ok {
			hooks = append(hooks, scopedHook{scope, fn})
		}
	})
	for _, h := range hooks {
		ctx.InAbsPath(h.scope).SetGraphParam(g, train.TrainerPerStepUpdateGraphFnParamKey, nil)
	}
	if o.apply == nil {
		o.hooks = hooks
	}
}

// Clear implements optimizers.Interface: it clears the wrapped optimizer's
// variables and the gradients kept under GradientsScope, and forgets the
// update graph; the next train graph the Trainer builds (after
// Trainer.ResetComputationGraphs) broadcasts the variables again.
func (o *Optimizer) Clear(ctx *context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.inner.Clear(ctx); err != nil {
		return err
	}
	if o.apply != nil {
		o.apply.Finalize()
	}
	o.ctx, o.vars, o.grads, o.hooks, o.apply = nil, nil, nil, nil, nil
	o.synced = map[string]bool{}
	return ctx.InAbsPath(GradientsScope).DeleteVariablesInScope()
}

// Step averages across the ranks the gradients that the last
// Trainer.TrainStep computed and applies them with the wrapped optimizer.
// Call it once after every TrainStep, on every rank (Attach does that for a
// train.Loop). Step without a TrainStep before it fails.
func (o *Optimizer) Step(ctx stdctx.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx == nil {
		return errors.New("hvdgomlx: Step before the first TrainStep")
	}
	if err := o.average(ctx); err != nil {
		return err
	}
	if o.apply == nil {
		e, err := context.NewExec(o.backend, o.ctx, o.updateGraph)
		if err != nil {
			return fmt.Errorf("hvdgomlx: update graph: %w", err)
		}
		// The wrapped optimizer creates its variables (its state, the
		// global step) while it builds its graph: build it once on a
		// graph that never runs, to broadcast them before the first
		// update. (Exec.PreCompile would do, but it hands the buffers of
		// the variables the graph changes to the backend, dropping their
		// values.)
		if err := o.probe(); err != nil {
			return err
		}
		if err := o.sync(); err != nil {
			return err
		}
		o.apply = e.WithName("hvdgomlx update")
	}
	if _, err := o.apply.Exec(); err != nil {
		return fmt.Errorf("hvdgomlx: update: %w", err)
	}
	return nil
}

// probe builds the update graph on a graph that is never compiled.
func (o *Optimizer) probe() (err error) {
	g := graph.NewGraph(o.backend, "hvdgomlx probe")
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hvdgomlx: update graph: %v", r)
		}
		g.Finalize()
	}()
	o.updateGraph(o.ctx, g)
	return nil
}

// updateGraph applies the (averaged) gradient variables with the wrapped
// optimizer, then the per-step update hooks moved from the train graph.
func (o *Optimizer) updateGraph(ctx *context.Context, g *graph.Graph) *graph.Node {
	ctx = ctx.Checked(false)
	grads := make([]*graph.Node, len(o.vars))
	for i, v := range o.vars {
		v.ValueGraph(g) // in use by g, so the wrapped optimizer updates it
		grads[i] = o.grads[i].ValueGraph(g)
	}
	o.with.UpdateGraphWithGradients(ctx, grads, o.lossDType)
	for _, h := range o.hooks {
		h.fn(ctx.InAbsPath(h.scope), g)
	}
	return optimizers.GetGlobalStepVar(ctx).ValueGraph(g)
}

// Attach makes loop call Step after every train step, before its other
// OnStep hooks (StepPriority).
func (o *Optimizer) Attach(loop *train.Loop) {
	loop.OnStep("hvdgomlx.Step", StepPriority, func(*train.Loop, []*tensors.Tensor) error {
		return o.Step(stdctx.Background())
	})
}
