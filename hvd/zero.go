package hvd

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/kernels"
)

// Sharded optimizer state (DistributedOptions.ShardState), in the manner
// of ZeRO stage 1: runs of consecutive parameters of one element type, of
// up to zeroBucketBytes (a larger parameter alone), are laid end to end
// (a bucket), and rank r of n owns the r-th of n contiguous pieces of each
// bucket (larger pieces first, the split ReduceScatter makes). A bucket's
// gradients are reduce-scattered as soon as the last pass of a step has
// reported all of them, overlapping the rest of the backward pass; Step
// runs the wrapped optimizer's kind over views of the owned pieces only
// (so its state covers them only) and all-gathers the updated values.

// A bucket's tensors are named after its first parameter:
// "zero.grad/<name>" (the reduce-scatter), "zero.param/<name>" (the
// all-gather) and "zero.state/<slot prefix><name>" (GatherState).

// zeroBucketBytes is the most bytes of gradients in one bucket made of
// several parameters: small enough that the first buckets' reduce-scatters
// overlap the rest of the backward pass, large enough that a model of
// millions of small tensors needs few.
const zeroBucketBytes = 16 << 20

// shardable is an optimizer that can be rebuilt over a part of its
// parameters: SGD and Adam.
type shardable interface {
	Optimizer
	stateCopier
	// over returns an optimizer of the same kind and configuration over
	// params, with zero slots and this one's step count and learning rate.
	over(params []*Param) (Optimizer, error)
	// slotPrefixes are the prefixes of the per-parameter slots
	// (prefix+name).
	slotPrefixes() []string
	// releaseSlots drops the slot buffers.
	releaseSlots()
	// setScalars sets the step count and the learning rate.
	setScalars(steps int64, lr float64)
}

// zeroState is the sharded part of a DistributedOptimizer.
type zeroState struct {
	template shardable // the wrapped optimizer, its slots released
	shard    shardable // template's kind over this rank's pieces
	buckets  []*zeroBucket
	where    map[string]zeroSlot // parameter name → its place
	rt       *Runtime
	err      error      // from the last bind
	mu       sync.Mutex // guards the buckets' left and h
}

// zeroSlot is where a parameter lies: its bucket and offset in it.
type zeroSlot struct {
	b   *zeroBucket
	off int
}

// zeroBucket is the parameters of one element type laid end to end.
type zeroBucket struct {
	dt     kernels.DType
	params []*Param
	offs   []int // offset of each parameter
	n      int   // elements in all
	wire   *Tensor
	acc    []float64 // BackwardPassesPerStep > 1: the step's sum so far
	left   int       // parameters the step's last pass has not reported yet
	h      *Handle   // the reduce-scatter in flight, or nil
	lo, hi int       // this rank's piece
	pieces []zeroPiece
	send   *Tensor // the wire's piece [lo, hi): this rank's updated values
}

// zeroPiece is the part of one parameter that lies in this rank's piece.
type zeroPiece struct {
	p    *Param
	a    int    // its first element in p
	at   int    // its first element in the rank's piece
	view *Param // p's elements [a, a+view.Len()), sharing p's memory
}

// checkShard reports the options that ShardState does not support.
func (d *DistributedOptions) checkShard() error {
	switch {
	case !d.ShardState:
		return nil
	case d.Op == kernels.Adasum:
		return fmt.Errorf("hvd: ShardState reduces with avg or sum, not adasum (Adasum combines whole gradients)")
	case d.Compression != NoCompression:
		return fmt.Errorf("hvd: ShardState sends gradients in their own type, not with %v", d.Compression)
	case d.Hook != nil:
		return fmt.Errorf("hvd: ShardState reduce-scatters the gradients itself and takes no Hook (%T)", d.Hook)
	}
	return nil
}

// newZero prepares the sharding of inner's state; bind places it.
func newZero(inner Optimizer, k int) (*zeroState, error) {
	t, ok := inner.(shardable)
	if !ok {
		return nil, fmt.Errorf("%w: ShardState needs an optimizer of this package (SGD, Adam) to rebuild over each rank's part, not %T", ErrInvalidParam, inner)
	}
	z := &zeroState{template: t, where: map[string]zeroSlot{}}
	open := map[kernels.DType]*zeroBucket{}
	for _, p := range inner.Params() {
		dt := p.DType()
		b := open[dt]
		if b == nil || b.n > 0 && (b.n+p.Len())*dt.Size() > zeroBucketBytes {
			b = &zeroBucket{dt: dt}
			open[dt] = b
			z.buckets = append(z.buckets, b)
		}
		z.where[p.Name] = zeroSlot{b, b.n}
		b.params, b.offs = append(b.params, p), append(b.offs, b.n)
		b.n += p.Len()
	}
	for _, b := range z.buckets {
		b.wire = newWire(b.dt, "zero.grad/"+b.params[0].Name, b.n)
		b.left = len(b.params)
		if k > 1 {
			b.acc = make([]float64, b.n)
		}
	}
	t.releaseSlots()
	return z, nil
}

// zeroRange is the piece [lo, hi) of n elements that rank owns of size:
// the split of ReduceScatter, larger pieces first.
func zeroRange(n, size, rank int) (lo, hi int) {
	q, r := n/size, n%size
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// bind places this rank's pieces for rt and rebuilds the optimizer over
// them, keeping the step count and learning rate; the slots start at zero
// (an elastic job's Sync loads them).
func (z *zeroState) bind(rt *Runtime) {
	steps, lr := z.template.scalars()
	if z.shard != nil {
		steps, lr = z.shard.scalars()
	}
	z.rt = rt
	var views []*Param
	for _, b := range z.buckets {
		b.left, b.h = len(b.params), nil
		b.lo, b.hi = zeroRange(b.n, rt.Size(), rt.Rank())
		b.pieces = b.pieces[:0]
		for i, p := range b.params {
			lo, hi := max(b.lo, b.offs[i])-b.offs[i], min(b.hi, b.offs[i]+p.Len())-b.offs[i]
			if lo >= hi {
				continue
			}
			v := &Param{Name: p.Name}
			if p.Is32() {
				v.Value32, v.Grad32 = p.Value32[lo:hi], p.Grad32[lo:hi]
			} else {
				v.Value, v.Grad = p.Value[lo:hi], p.Grad[lo:hi]
			}
			b.pieces = append(b.pieces, zeroPiece{p: p, a: lo, at: b.offs[i] + lo - b.lo, view: v})
			views = append(views, v)
		}
		es := b.dt.Size()
		b.send = &Tensor{Name: "zero.param/" + b.params[0].Name, DType: b.dt, Shape: []int{b.hi - b.lo}, Data: b.wire.Data[b.lo*es : b.hi*es]}
	}
	shard, err := z.template.over(views)
	if err != nil {
		z.err = err
		return
	}
	z.shard, z.err = shard.(shardable), nil
	z.shard.setScalars(steps, lr)
}

// report takes g's gradient of this pass into its bucket: scaled into the
// wire (k == 1) or added to the step's sum, which the last pass scales
// into the wire. The last pass's report of a bucket's last parameter
// starts the bucket's reduce-scatter.
func (z *zeroState) report(g *gradSync, last bool, k int) {
	s := z.where[g.p.Name]
	b, n := s.b, g.p.Len()
	es := b.dt.Size()
	dst := b.wire.Data[s.off*es : (s.off+n)*es]
	switch {
	case k == 1 && g.p.Is32():
		encode(dst, b.dt, g.p.Grad32, g.pre)
	case k == 1:
		encode(dst, b.dt, g.p.Grad, g.pre)
	default:
		acc := b.acc[s.off : s.off+n]
		if g.p.Is32() {
			accumulate(acc, g.p.Grad32)
		} else {
			accumulate(acc, g.p.Grad)
		}
		if !last {
			return
		}
		encode(dst, b.dt, acc, g.pre/float64(k))
		clear(acc)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if b.left--; b.left == 0 && z.rt.Size() > 1 {
		b.h = z.rt.reduceScatterInPlace(b.wire)
	}
}

// reduce reduce-scatters every bucket and writes this rank's piece of the
// result into its parameters' gradients (the views' Grad).
func (z *zeroState) reduce(ctx context.Context) error {
	if z.err != nil {
		return z.err
	}
	outs := make([]*Tensor, len(z.buckets))
	hs := make([]*Handle, len(z.buckets))
	z.mu.Lock()
	for i, b := range z.buckets {
		outs[i], hs[i] = b.wire, b.h
		b.left, b.h = len(b.params), nil
	}
	z.mu.Unlock()
	for i, h := range hs {
		if h == nil {
			continue // a job of one rank: the sum is the wire
		}
		if err := h.Wait(ctx); err != nil {
			return err
		}
		outs[i] = h.Output()
	}
	for i, b := range z.buckets {
		if got := outs[i].Count(); got != b.hi-b.lo {
			return fmt.Errorf("hvd: ShardState: reduce-scatter gave rank %d %d of %d %v gradients, want %d", z.rt.Rank(), got, b.n, b.dt, b.hi-b.lo)
		}
		es := b.dt.Size()
		for _, pc := range b.pieces {
			src := outs[i].Data[pc.at*es:]
			if pc.view.Is32() {
				decode(pc.view.Grad32, src, b.dt, 1)
			} else {
				decode(pc.view.Grad, src, b.dt, 1)
			}
		}
	}
	return nil
}

// step runs the optimizer over this rank's pieces and all-gathers the
// updated values into every parameter.
func (z *zeroState) step(ctx context.Context) error {
	if z.err != nil {
		return z.err
	}
	if err := z.shard.Step(ctx); err != nil {
		return err
	}
	if z.rt.Size() == 1 {
		return nil // the views are the whole parameters
	}
	hs := make([]*Handle, len(z.buckets))
	for i, b := range z.buckets {
		es := b.dt.Size()
		for _, pc := range b.pieces {
			dst := b.send.Data[pc.at*es:]
			if pc.view.Is32() {
				copy(kernels.FromBytes[float32](dst), pc.view.Value32)
			} else {
				copy(kernels.FromBytes[float64](dst), pc.view.Value)
			}
		}
		hs[i] = z.rt.allgatherInto(b.send, b.wire)
	}
	if err := waitAll(ctx, hs); err != nil {
		return err
	}
	for i, b := range z.buckets {
		out := hs[i].Output()
		if out.Count() != b.n {
			return fmt.Errorf("hvd: ShardState: all-gather gave %d of %d %v values", out.Count(), b.n, b.dt)
		}
		for j, p := range b.params {
			if p.Is32() {
				copy(p.Value32, kernels.FromBytes[float32](out.Data)[b.offs[j]:])
			} else {
				copy(p.Value, kernels.FromBytes[float64](out.Data)[b.offs[j]:])
			}
		}
	}
	return nil
}

// ShardRange returns the piece [lo, hi) of the named parameter's elements
// whose optimizer state this rank keeps (with ShardState; the whole
// parameter without), and false for an unknown name. After Synchronize or
// Step the averaged gradient is in the parameter's Grad (Grad32) only
// there.
func (o *DistributedOptimizer) ShardRange(name string) (lo, hi int, ok bool) {
	g := o.index[name]
	if g == nil {
		return 0, 0, false
	}
	if o.zero == nil {
		return 0, g.p.Len(), true
	}
	s := o.zero.where[name]
	lo = min(max(s.b.lo-s.off, 0), g.p.Len())
	hi = max(min(s.b.hi-s.off, g.p.Len()), lo)
	return lo, hi, true
}

// updater is the optimizer that applies the updates: the one over this
// rank's part with ShardState, else the wrapped one.
func (o *DistributedOptimizer) updater() Optimizer {
	if o.zero != nil && o.zero.shard != nil {
		return o.zero.shard
	}
	return o.inner
}

// update runs the updater after the gradients are in.
func (o *DistributedOptimizer) update(ctx context.Context) error {
	if o.zero != nil {
		return o.zero.step(ctx)
	}
	return o.inner.Step(ctx)
}

// reduceScatterInPlace sums t over the ranks in t itself, which it leaves
// changed: the Output is this rank's share of the sum, within t.
func (r *Runtime) reduceScatterInPlace(t *Tensor) *Handle {
	req := request(t, engine.KindReducescatter)
	req.ReduceOp, req.Clobber = kernels.Sum, true
	return r.submit("reducescatter", t, req, result(t), false)
}

// allgatherInto all-gathers every rank's piece into out, whose bytes piece
// may share (as its own part of out): the Output is out's bytes.
func (r *Runtime) allgatherInto(piece, out *Tensor) *Handle {
	req := request(piece, engine.KindAllgather)
	req.Out = out.Data
	return r.submit("allgather", piece, req, result(piece), false)
}
