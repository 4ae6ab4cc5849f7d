package hvd

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/kernels"
)

// DistributedOptions configure a DistributedOptimizer. The zero value
// averages the gradients, in their own type, every backward pass.
type DistributedOptions struct {
	// Op reduces the gradients: kernels.Average (the zero value means
	// Average), kernels.Sum or kernels.Adasum. Adasum combines each
	// parameter's gradients with coefficients of its own (see
	// collective.Comm.AllreduceAdasum) and needs gradients that travel as
	// float32 or float64 (NoCompression or FP32Compression). Horovod's
	// Adasum optimizers reduce the wrapped optimizer's update instead of
	// the gradient; for plain SGD that is the same result (Adasum of
	// vectors all scaled by -lr is the Adasum scaled by -lr), for Adam
	// and momentum it is not.
	Op kernels.Op
	// Compression is the gradients' wire type (NoCompression: each
	// parameter's own, float64 or float32).
	Compression Compression
	// BackwardPassesPerStep accumulates the gradients of this many backward
	// passes (each ended by a Step call) locally and all-reduces their mean
	// once; only every such Step updates the parameters. 0 means 1.
	BackwardPassesPerStep int
	// GradientPredivideFactor f splits the average of compressed gradients
	// into a division by f before the sum and by size/f after it (Average
	// only; 0 means 1). Use it to keep half-precision sums from
	// overflowing. Gradients sent in their own type (NoCompression, or
	// FP32Compression of float32 parameters) are always divided by size
	// before the sum.
	GradientPredivideFactor float64
	// InPlace all-reduces each gradient that travels in its own type
	// (NoCompression, or FP32Compression of float32 parameters) in its
	// Grad (Grad32), instead of in a copy: it saves two copies of every
	// gradient a step (in mnist at np 2, about 13% of a rank's training
	// processor time in a CPU profile), and the result is the same bit for
	// bit. The gradient must
	// then be left alone from its GradReady until Step returns (a backward
	// pass that reports each layer once it has left it does). With
	// BackwardPassesPerStep above 1, or compressed gradients, the
	// optimizer works on copies as without it.
	InPlace bool
	// Hook, when set, exchanges each gradient in place of the all-reduce:
	// it compresses the gradient, runs the collectives of its compressed
	// form and restores the sum (GradientHook; package hvd/compress has
	// PowerSGD and top-k). It sees each gradient as float64, after the
	// local sum of BackwardPassesPerStep passes and the division of the
	// average; InPlace does not apply to it. It takes Op avg or sum, and
	// no Compression or GradientPredivideFactor of its own. A Compression
	// value given as the Hook is moved to Compression (its fast path, the
	// cast in the all-reduce's own buffers), so Options reports it there.
	Hook GradientHook
	// ShardState keeps only this rank's part of the optimizer state
	// (ZeRO stage 1): the gradients are reduce-scattered instead of
	// all-reduced, each rank updates its 1/size contiguous piece of each
	// bucket of parameters laid end to end (consecutive parameters of one
	// element type, up to 16 MiB), and the updated values are
	// all-gathered (ShardRange, StateBytes). Needs an SGD or Adam to wrap
	// (whose own slots are then released: do not step it directly), Op avg
	// or sum, NoCompression and no Hook; InPlace has no effect. State, and so
	// NewCheckpoint and BroadcastOptimizerState, gathers the parts: with
	// it they are collective. See the README's "Sharded optimizer state".
	ShardState bool
}

// DistributedOptimizer wraps an optimizer so that every rank applies the
// same update: the gradients averaged over all ranks (or summed, or combined
// with Adasum: DistributedOptions.Op). Report each
// parameter's gradient with GradReady as soon as the backward pass has
// computed it; its all-reduce starts at once, overlapping the rest of the
// backward pass. Step reports whatever was not reported yet, waits for
// every all-reduce, and then runs the wrapped optimizer. The all-reduces
// are named "grad/<parameter name>". In a job of one rank, gradients that
// travel in their own type are left in Grad as they are (their mean over
// one rank) and no all-reduce runs.
type DistributedOptimizer struct {
	inner Optimizer
	rt    *Runtime
	opts  DistributedOptions
	grads []*gradSync
	index map[string]*gradSync
	zero  *zeroState // ShardState; nil without

	mu      sync.Mutex
	pass    int         // backward passes completed since the last update
	synced  bool        // Synchronize ran for the pending update
	pending []*gradSync // all-reduces of this step, in the order started

	// hookCtx is the context of the hook goroutines (Hook); hookCancel
	// ends it when a Step gives up waiting for them.
	hookCtx    context.Context
	hookCancel context.CancelFunc
}

// gradSync is one parameter's gradient on its way through the all-reduce.
type gradSync struct {
	p        *Param
	acc      []float64 // sum of this step's earlier passes; nil while unused
	wire     *Tensor   // the compressed gradient, owned by the optimizer; nil in place
	inPlace  bool      // all-reduced in Grad itself (DistributedOptions.InPlace)
	pre      float64   // multiplies the gradient on its way into wire
	post     float64   // multiplies the sum on its way back into the gradient
	h        *Handle   // the all-reduce in flight, or nil
	reported bool      // reported in the current pass
	// alone: the job has one rank and the gradient travels in its own type
	// with no scaling, so its all-reduce would return it unchanged, bit
	// for bit (pre and post are 1); the optimizer leaves it in Grad and
	// keeps the engine out of the step.
	alone bool
	// hook is the gradient as the Hook sees it (nil without a Hook);
	// hookDone is closed when the hook's exchange of this step has ended,
	// with hookErr its error.
	hook     *HookGradient
	hookDone chan struct{}
	hookErr  error
}

// NewDistributedOptimizer wraps inner for the job of rt (nil: the default
// runtime of Init). Every rank must wrap optimizers over parameters of the
// same names and lengths, with the same options.
func NewDistributedOptimizer(inner Optimizer, rt *Runtime, opts DistributedOptions) (*DistributedOptimizer, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	if inner == nil {
		return nil, fmt.Errorf("%w: DistributedOptimizer needs an optimizer to wrap, got nil", ErrInvalidParam)
	}
	if err := opts.normalize(); err != nil {
		return nil, invalidArgument(err)
	}
	if err := checkParams(inner.Params()); err != nil {
		return nil, err
	}
	o := &DistributedOptimizer{inner: inner, opts: opts, index: map[string]*gradSync{}}
	for _, p := range inner.Params() {
		g := &gradSync{p: p}
		if opts.Hook != nil {
			g.hook = newHookGradient(p)
		}
		o.grads = append(o.grads, g)
		o.index[p.Name] = g
	}
	if opts.ShardState {
		if o.zero, err = newZero(inner, opts.BackwardPassesPerStep); err != nil {
			return nil, err
		}
	}
	o.bind(rt)
	return o, nil
}

// bind makes rt the job the optimizer averages over: what depends on its
// size (the scale factors, whether a gradient is all-reduced at all) is
// worked out again, and a Hook's state of every gradient is dropped. An
// elastic job binds each new formation (RunElastic); no step may be in
// progress.
func (o *DistributedOptimizer) bind(rt *Runtime) {
	o.mu.Lock()
	o.rt, o.pass, o.synced, o.pending = rt, 0, false, nil
	o.mu.Unlock()
	if o.opts.Hook != nil {
		o.newHookContext()
	}
	for _, g := range o.grads {
		g.h, g.reported = nil, false
		if g.acc != nil {
			clear(g.acc)
		}
		p := g.p
		if g.hook != nil {
			g.hook.rt = rt
			g.hook.resetState()
			g.pre, g.post = o.opts.factors(rt.Size(), true)
			g.inPlace, g.alone = false, false
			g.wire = newWire(p.DType(), "grad/"+p.Name, p.Len())
			continue
		}
		wt := o.opts.Compression.WireDTypeFor(p.DType())
		g.pre, g.post = o.opts.factors(rt.Size(), wt == p.DType())
		g.inPlace = o.opts.InPlace && wt == p.DType() && o.opts.BackwardPassesPerStep == 1 && g.post == 1
		g.wire = nil
		if !g.inPlace && o.zero == nil {
			g.wire = newWire(wt, "grad/"+p.Name, p.Len())
		}
		g.alone = rt.Size() == 1 && wt == p.DType() && g.pre == 1 && g.post == 1
	}
	if o.zero != nil {
		o.zero.bind(rt)
	}
}

// factors are what a gradient is multiplied by on its way into its wire
// buffer (pre) and what the wire's sum is multiplied by on its way back
// (post). The wire all-reduce is a plain sum: the scaling rides on these
// two copies, which touch every element anyway, instead of passes of its
// own. A gradient that is converted (compressed) is divided by
// GradientPredivideFactor before and by size/GradientPredivideFactor after
// the sum; one that travels in its own type is divided by size before it,
// so that only a plain copy (a memmove) is left for Step to do after the
// last all-reduce.
func (d *DistributedOptions) factors(size int, sameType bool) (pre, post float64) {
	switch {
	case d.Op == kernels.Sum || d.Op == kernels.Adasum:
		return 1, 1
	case sameType:
		return 1 / float64(size), 1
	default:
		return 1 / d.GradientPredivideFactor, d.GradientPredivideFactor / float64(size)
	}
}

func (d *DistributedOptions) normalize() error {
	if d.Op == 0 {
		d.Op = kernels.Average
	}
	switch d.Op {
	case kernels.Average, kernels.Sum:
	case kernels.Adasum:
		if d.Compression == FP16Compression || d.Compression == BF16Compression {
			return fmt.Errorf("hvd: DistributedOptimizer with adasum sends float32 or float64, not %v", d.Compression)
		}
	default:
		return fmt.Errorf("hvd: DistributedOptimizer reduces with avg, sum or adasum, not %v", d.Op)
	}
	if c, ok := d.Hook.(Compression); ok {
		if d.Compression != NoCompression && d.Compression != c {
			return fmt.Errorf("hvd: DistributedOptimizer given Compression %v and Hook %v", d.Compression, c)
		}
		d.Compression, d.Hook = c, nil
	}
	if d.Hook != nil {
		switch {
		case d.Op == kernels.Adasum:
			return fmt.Errorf("hvd: DistributedOptimizer with a Hook reduces with avg or sum, not adasum")
		case d.Compression != NoCompression:
			return fmt.Errorf("hvd: DistributedOptimizer with a Hook takes no Compression (%v); the hook compresses", d.Compression)
		case d.GradientPredivideFactor != 0 && d.GradientPredivideFactor != 1:
			return fmt.Errorf("hvd: DistributedOptimizer with a Hook takes no GradientPredivideFactor (%v)", d.GradientPredivideFactor)
		}
	}
	if d.BackwardPassesPerStep == 0 {
		d.BackwardPassesPerStep = 1
	}
	if d.BackwardPassesPerStep < 0 {
		return fmt.Errorf("hvd: BackwardPassesPerStep %d must be positive", d.BackwardPassesPerStep)
	}
	if d.GradientPredivideFactor == 0 {
		d.GradientPredivideFactor = 1
	}
	if d.GradientPredivideFactor != 1 && d.Op != kernels.Average {
		return fmt.Errorf("hvd: GradientPredivideFactor needs Op avg, not %v", d.Op)
	}
	if d.GradientPredivideFactor < 0 {
		return fmt.Errorf("hvd: GradientPredivideFactor %v must be positive", d.GradientPredivideFactor)
	}
	if int(d.Compression) >= len(compressionNames) {
		return fmt.Errorf("hvd: unknown %v", d.Compression)
	}
	return d.checkShard()
}

// newWire allocates a tensor of n elements of type wt.
func newWire(wt kernels.DType, name string, n int) *Tensor {
	switch wt {
	case kernels.F32:
		return NewTensor(name, make([]float32, n))
	case kernels.F16:
		return NewTensor(name, make([]kernels.Float16, n))
	case kernels.BF16:
		return NewTensor(name, make([]kernels.BFloat16, n))
	default:
		return NewTensor(name, make([]float64, n))
	}
}
