package hvdgorgonia

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ErrUnsupported reports a learnable whose value or gradient the adapter
// cannot all-reduce in place: not float32 or float64, not a dense tensor or
// a scalar, a strided view, or held in device memory.
var ErrUnsupported = errors.New("hvdgorgonia: unsupported value")

// ErrInvalid reports an invalid argument: a nil solver or learnable, a
// learnable with no value, or a reduction other than Average or Sum.
var ErrInvalid = errors.New("hvdgorgonia: invalid argument")

// Options configure a DistributedSolver. The zero value averages the
// gradients under the names "gorgonia/grad/<i>" and steps with
// context.Background.
type Options struct {
	// Op reduces the gradients: kernels.Average (the zero value means
	// Average) or kernels.Sum.
	Op kernels.Op
	// Prefix starts the names of the gradients on the wire (the zero value
	// means "gorgonia/"). Two solvers that step at the same time on one
	// runtime need different prefixes.
	Prefix string
	// Context bounds the all-reduces of Step (nil: context.Background).
	// StepContext takes one per call instead.
	Context context.Context
}

// DistributedSolver is a gorgonia.Solver that averages the gradients of
// the model across the ranks of a gorovod runtime before the solver it
// wraps updates the values. Every rank must step the same learnables, in
// the same order, the same number of times. A DistributedSolver is not safe
// for concurrent use.
type DistributedSolver struct {
	inner gorgonia.Solver
	rt    *hvd.Runtime
	opts  Options

	ts []*hvd.Tensor
	hs []*hvd.Handle
}

var _ gorgonia.Solver = (*DistributedSolver)(nil)

// NewDistributedSolver wraps inner (any gorgonia.Solver: Vanilla, Momentum,
// Adam, RMSProp, AdaGrad, …) for data-parallel training on rt (nil: the
// default runtime of hvd.Init).
func NewDistributedSolver(inner gorgonia.Solver, rt *hvd.Runtime, opts Options) (*DistributedSolver, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil inner solver", ErrInvalid)
	}
	if rt == nil {
		if rt = hvd.Default(); rt == nil {
			return nil, hvd.ErrNotInitialized
		}
	}
	switch opts.Op {
	case 0:
		opts.Op = kernels.Average
	case kernels.Average, kernels.Sum:
	default:
		return nil, fmt.Errorf("%w: gradients reduce by Average or Sum, not %v", ErrInvalid, opts.Op)
	}
	if opts.Prefix == "" {
		opts.Prefix = "gorgonia/"
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	return &DistributedSolver{inner: inner, rt: rt, opts: opts}, nil
}

// Inner returns the wrapped solver.
func (s *DistributedSolver) Inner() gorgonia.Solver { return s.inner }

// Step all-reduces the gradient of every learnable in model in place, then
// steps the wrapped solver, then zeros every gradient. It uses the
// Options' Context; see StepContext.
func (s *DistributedSolver) Step(model []gorgonia.ValueGrad) error {
	return s.StepContext(s.opts.Context, model)
}

// StepContext is Step bounded by ctx.
//
// The gradients' all-reduces are all in flight together (the runtime fuses
// them into as few messages as its fusion buffer allows); each works on
// the gradient's own memory, with no copy. Once all are done the wrapped
// solver updates the values from the averaged gradients.
//
// Gorgonia's tape machine, run with gorgonia.BindDualValues, adds each
// run's gradient to the gradient the learnable already holds; only a
// solver that zeros the gradient after using it keeps steps apart.
// Gorgonia's own solvers do, each as it finishes a learnable, so one that
// fails part way leaves the rest of the model's gradients in place, and a
// solver of one's own may not zero at all. StepContext therefore zeros
// every learnable's gradient after the wrapped solver returns, whether it
// succeeded or not, so that the next backward pass starts from zero.
func (s *DistributedSolver) StepContext(ctx context.Context, model []gorgonia.ValueGrad) error {
	if err := s.reduce(ctx, model); err != nil {
		return err
	}
	err := s.inner.Step(model)
	if zerr := zeroGrads(model); err == nil {
		err = zerr
	}
	return err
}

// reduce all-reduces every gradient of model in place.
func (s *DistributedSolver) reduce(ctx context.Context, model []gorgonia.ValueGrad) error {
	s.ts = s.ts[:0]
	for i, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			return fmt.Errorf("hvdgorgonia: gradient of learnable %d (%s): %w", i, nameOf(vg), err)
		}
		t, err := wrap(fmt.Sprintf("%sgrad/%d", s.opts.Prefix, i), g)
		if err != nil {
			return fmt.Errorf("gradient of learnable %d (%s): %w", i, nameOf(vg), err)
		}
		s.ts = append(s.ts, t)
	}
	if s.rt.Size() == 1 && s.opts.Op == kernels.Average {
		return nil // the mean over one rank is the gradient itself
	}
	s.hs = s.hs[:0]
	for _, t := range s.ts {
		s.hs = append(s.hs, s.rt.AllreduceAsync(t, s.opts.Op, hvd.ReduceOptions{}))
	}
	return waitAll(ctx, s.hs)
}

// BroadcastLearnables copies root's values of the learnables into every
// rank's learnables on rt (nil: the default runtime), in place and all in
// flight together, so that all ranks start from the same point. Every rank
// must pass learnables of the same types and shapes in the same order, each
// with its value bound (gorgonia.WithValue, gorgonia.WithInit, or a
// machine's run).
func BroadcastLearnables(ctx context.Context, rt *hvd.Runtime, learnables []*gorgonia.Node, root int) error {
	if rt == nil {
		if rt = hvd.Default(); rt == nil {
			return hvd.ErrNotInitialized
		}
	}
	hs := make([]*hvd.Handle, 0, len(learnables))
	for i, n := range learnables {
		if n == nil {
			return fmt.Errorf("%w: learnable %d is nil", ErrInvalid, i)
		}
		v := n.Value()
		if v == nil {
			return fmt.Errorf("%w: learnable %d (%s) has no value", ErrInvalid, i, n.Name())
		}
		t, err := wrap(fmt.Sprintf("gorgonia/value/%d", i), v)
		if err != nil {
			waitAll(ctx, hs)
			return fmt.Errorf("learnable %d (%s): %w", i, n.Name(), err)
		}
		hs = append(hs, rt.BroadcastAsync(t, root))
	}
	return waitAll(ctx, hs)
}

// Tensor returns v's elements as a gorovod tensor named name that shares
// v's memory: an all-reduce or broadcast of it changes v. v must be a
// float32 or float64 *tensor.Dense of at least one dimension that is not a
// strided view, or a gorgonia *F32 or *F64 scalar.
func Tensor(name string, v gorgonia.Value) (*hvd.Tensor, error) {
	return wrap(name, v)
}

// Dense returns t's elements as a *tensor.Dense of t's shape (a vector
// when t has none) that shares t's memory: the other direction of Tensor.
// t must be float32 or float64.
func Dense(t *hvd.Tensor) (*tensor.Dense, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil tensor", ErrInvalid)
	}
	shape := tensor.Shape(t.Shape)
	if len(shape) == 0 {
		shape = tensor.Shape{t.Count()}
	}
	if shape.TotalSize() != t.Count() {
		return nil, fmt.Errorf("%w: shape %v of %d elements for %d", ErrInvalid, shape, shape.TotalSize(), t.Count())
	}
	switch t.DType {
	case kernels.F32:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(hvd.Values[float32](t))), nil
	case kernels.F64:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(hvd.Values[float64](t))), nil
	}
	return nil, fmt.Errorf("%w: dtype %v (float32 and float64 only)", ErrUnsupported, t.DType)
}

// wrap is Tensor.
func wrap(name string, v gorgonia.Value) (*hvd.Tensor, error) {
	switch x := v.(type) {
	case *gorgonia.F32:
		return hvd.NewTensor(name, unsafe.Slice((*float32)(x), 1)), nil
	case *gorgonia.F64:
		return hvd.NewTensor(name, unsafe.Slice((*float64)(x), 1)), nil
	case *tensor.Dense:
		if x.RequiresIterator() {
			return nil, fmt.Errorf("%w: a strided view of shape %v", ErrUnsupported, x.Shape())
		}
		if !x.IsNativelyAccessible() {
			return nil, fmt.Errorf("%w: a tensor in device memory", ErrUnsupported)
		}
		if x.IsScalar() {
			return nil, fmt.Errorf("%w: a 0-d *tensor.Dense (use a gorgonia scalar)", ErrUnsupported)
		}
		switch d := x.Data().(type) {
		case []float32:
			return hvd.NewTensor(name, d), nil
		case []float64:
			return hvd.NewTensor(name, d), nil
		default:
			return nil, fmt.Errorf("%w: dtype %v (float32 and float64 only)", ErrUnsupported, x.Dtype())
		}
	case nil:
		return nil, fmt.Errorf("%w: no value", ErrUnsupported)
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnsupported, v)
	}
}

// zeroGrads zeros every gradient of model that it can reach.
func zeroGrads(model []gorgonia.ValueGrad) error {
	var first error
	for i, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("hvdgorgonia: gradient of learnable %d (%s): %w", i, nameOf(vg), err)
			}
			continue
		}
		switch x := g.(type) {
		case *gorgonia.F32:
			*x = 0
		case *gorgonia.F64:
			*x = 0
		case tensor.Tensor:
			x.Zero()
		default:
			if first == nil {
				first = fmt.Errorf("gradient of learnable %d (%s): %w: %T", i, nameOf(vg), ErrUnsupported, g)
			}
		}
	}
	return first
}

// waitAll waits for every handle and returns the first error.
func waitAll(ctx context.Context, hs []*hvd.Handle) error {
	var first error
	for _, h := range hs {
		if err := h.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// nameOf is vg's name where it has one.
func nameOf(vg gorgonia.ValueGrad) string {
	if n, ok := vg.(gorgonia.Namer); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", vg)
}
