package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// A GradientHook exchanges the gradients of a DistributedOptimizer in
// place of its all-reduce (DistributedOptions.Hook), the way PyTorch DDP's
// communication hooks do: it compresses each parameter's gradient, runs
// the collectives that carry the compressed form (HookGradient.Allreduce,
// HookGradient.Allgather) and writes the restored sum back. Package
// hvd/compress has PowerSGD and top-k hooks; the Compression values are
// hooks too (wire-type casts).
//
// The optimizer calls ReduceGradient once per parameter and step, in a
// goroutine of its own that starts when the gradient is reported
// (GradReady, or Step for those not reported), so a hook's collectives
// overlap the rest of the backward pass and the other parameters'
// exchanges; Step waits for all of them. The engine negotiates and
// caches the hook's collectives like any others, and fuses its
// all-reduces (the P factors of several gradients travel as one): name them with
// fixed parts and give them fixed lengths from step to step, so that the
// response cache holds them. ReduceGradient must be safe for concurrent
// calls on different gradients; what it keeps from step to step goes in
// the gradient's state (HookGradient.State), never in the hook.
//
// Every rank must use the same hook with the same settings. While a rank
// has joined (Runtime.Join) the others' all-reduces count it as zeros,
// as without a hook; an all-gather cannot run then (ErrJoined), so hooks
// that all-gather (top-k) do not work with Join.
type GradientHook interface {
	// ReduceGradient replaces g.Values, this rank's contribution, with
	// the sum of every rank's contribution or the hook's approximation
	// of it. When the optimizer averages, the contribution has already
	// been divided by the job's size (and by BackwardPassesPerStep), so
	// the sum is the average.
	ReduceGradient(ctx context.Context, g *HookGradient) error
}

// HookGradient is one parameter's gradient on its way through a
// GradientHook, with the state the hook keeps for it from step to step.
//
// The state (error-feedback residuals, warm-start factors) lives as long
// as the optimizer's binding to a job: an elastic job's new formation
// (RunElastic binds the optimizer to each) starts every gradient with no
// state. That is on purpose: after a reset the parameters roll back to the
// last commit, so residuals of the steps being redone would be applied
// twice, and ranks that join have no state to match the others' with.
type HookGradient struct {
	// Name is the parameter's name; the hook's collectives are named
	// "grad/<Name>" and "grad/<Name>/<part>".
	Name string
	// Shape is the parameter's shape (Param.Shape, or {Len} when that is
	// nil).
	Shape []int
	// DType is the parameter's element type (kernels.F64 or kernels.F32):
	// what Allreduce sends.
	DType kernels.DType
	// Values is this rank's contribution on the way in and the reduced
	// gradient on the way out. It is float64 whatever the parameter's
	// type (as are the state buffers): a hook holds 8 bytes a value
	// beyond the model, and a float32 model's gradients are widened on
	// the way in and rounded on the way out.
	Values []float64

	rt    *Runtime
	state map[string][]float64
	wires map[string]*Tensor
}

// NewHookGradient returns p's gradient as a hook sees it, on the job of
// rt (nil: the default runtime), with empty state: for running a
// GradientHook by hand (ReduceGradient) outside a DistributedOptimizer,
// and for testing one. Values starts as zeros; copy the contribution in.
func NewHookGradient(rt *Runtime, p *Param) (*HookGradient, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	if err := checkParams([]*Param{p}); err != nil {
		return nil, err
	}
	g := newHookGradient(p)
	g.rt = rt
	return g, nil
}

// newHookGradient returns the hook's view of p.
func newHookGradient(p *Param) *HookGradient {
	shape := p.Shape
	if shape == nil {
		shape = []int{p.Len()}
	}
	return &HookGradient{Name: p.Name, Shape: shape, DType: p.DType(), Values: make([]float64, p.Len()),
		state: map[string][]float64{}, wires: map[string]*Tensor{}}
}

// Rank is this rank's index in the job.
func (g *HookGradient) Rank() int { return g.rt.Rank() }

// Size is the number of ranks in the job.
func (g *HookGradient) Size() int { return g.rt.Size() }

// State returns the gradient's buffer named key, of n values, which keeps
// its contents from step to step; fresh says it was just made (zeroed),
// on the first step or the first after a new binding. Asking for a known
// key with another length makes a fresh buffer.
func (g *HookGradient) State(key string, n int) (buf []float64, fresh bool) {
	if b, ok := g.state[key]; ok && len(b) == n {
		return b, false
	}
	b := make([]float64, n)
	g.state[key] = b
	return b, true
}

// resetState drops every state buffer.
func (g *HookGradient) resetState() { clear(g.state) }

// partName is the collective's name for part.
func (g *HookGradient) partName(part string) string {
	if part == "" {
		return "grad/" + g.Name
	}
	return "grad/" + g.Name + "/" + part
}

// Allreduce replaces x with its sum over the ranks. It travels in DType:
// a float32 parameter's values are rounded to float32 on the way. part
// ("" for the gradient itself) names the collective among the hook's.
func (g *HookGradient) Allreduce(ctx context.Context, part string, x []float64) error {
	return g.AllreduceAs(ctx, part, x, g.DType)
}

// AllreduceAs is Allreduce with the values sent as elements of wt
// (kernels.F64, F32, F16 or BF16) and summed in that type.
func (g *HookGradient) AllreduceAs(ctx context.Context, part string, x []float64, wt kernels.DType) error {
	switch wt {
	case kernels.F64, kernels.F32, kernels.F16, kernels.BF16:
	default:
		return invalidArgument(fmt.Errorf("hvd: hook all-reduce of %q cannot send %v", g.partName(part), wt))
	}
	if err := ctx.Err(); err != nil {
		return err // submit nothing that the other ranks would wait for alone
	}
	name := g.partName(part)
	if wt == kernels.F64 {
		return g.rt.Allreduce(ctx, NewTensor(name, x), kernels.Sum, ReduceOptions{})
	}
	w := g.wires[part]
	if w == nil || w.DType != wt || w.Count() != len(x) {
		w = newWire(wt, name, len(x))
		g.wires[part] = w
	}
	encode(w.Data, wt, x, 1)
	if err := g.rt.Allreduce(ctx, w, kernels.Sum, ReduceOptions{}); err != nil {
		return err
	}
	decode(x, w.Data, wt, 1)
	return nil
}

// Allgather returns every rank's x (each rank's of the same length), in
// rank order, sent as float64.
func (g *HookGradient) Allgather(ctx context.Context, part string, x []float64) ([]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := g.rt.Allgather(ctx, NewTensor(g.partName(part), x))
	if err != nil {
		return nil, err
	}
	return kernels.FromBytes[float64](out.Data)[:out.Count()], nil
}

// ReduceGradient makes a Compression a GradientHook: it all-reduces g's
// values in the wire type (AllreduceAs). A DistributedOptimizer given a
// Compression as its Hook does not call this: it takes the cast into its
// own wire buffers (DistributedOptions.Compression), which is the same
// exchange with one copy fewer and the scaling of GradientPredivideFactor.
func (c Compression) ReduceGradient(ctx context.Context, g *HookGradient) error {
	return g.AllreduceAs(ctx, "", g.Values, c.WireDTypeFor(g.DType))
}
