package hvd

import (
	"context"
	"hash/fnv"
	"slices"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/kernels"
)

// ReduceOptions scale an all-reduce (or a reduce-scatter): inputs are
// multiplied by Prescale and the result by Postscale (zero means 1). Op
// Average divides by Size.
//
// On integer tensors every scaling, Average's division included, rounds to
// the nearest integer with ties to even and saturates to the type's range
// (kernels.Scale), where Horovod truncates toward zero: the Average of 3
// and 4 is 4 and of 1 and 2 is 2 (Horovod: 3 and 1). The same holds while
// ranks have joined (Join): they add zeros and the sum is still divided by
// Size, so 3 averaged with a joined rank is 2.
type ReduceOptions = collective.ReduceOptions

// request describes t to the engine as an operation of kind.
func request(t *Tensor, kind engine.Kind) engine.Request {
	return engine.Request{Name: t.Name, Kind: kind, DType: t.DType, Shape: t.shape()}
}

// inPlace is the Output of in-place operations: the tensor itself.
func inPlace(t *Tensor) func([]byte, []int) *Tensor {
	return func([]byte, []int) *Tensor { return t }
}

// result is the Output of operations that make a new tensor named like t.
func result(t *Tensor) func([]byte, []int) *Tensor {
	return func(data []byte, shape []int) *Tensor {
		return &Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: data}
	}
}

// AllreduceAsync starts an in-place all-reduce of t with op. On success
// every rank's t holds the reduction of all ranks' inputs. Ranks may
// submit their tensors in any order; ready tensors are fused into few
// large all-reduces.
func (r *Runtime) AllreduceAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	req, err := allreduceRequest(t, op, o)
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("allreduce", t, req, inPlace(t), false)
}

// allreduceRequest checks t and describes its all-reduce with op to the
// engine.
func allreduceRequest(t *Tensor, op kernels.Op, o ReduceOptions) (engine.Request, error) {
	if err := t.validate(); err != nil {
		return engine.Request{}, err
	}
	req := request(t, engine.KindAllreduce)
	req.ReduceOp, req.Prescale, req.Postscale = op, o.Prescale, o.Postscale
	return req, nil
}

// Allreduce is AllreduceAsync followed by Wait.
func (r *Runtime) Allreduce(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) error {
	if !waitsAtOnce(ctx) {
		return r.AllreduceAsync(t, op, o).Wait(ctx)
	}
	req, err := allreduceRequest(t, op, o)
	if err != nil {
		return err
	}
	return r.runInPlace(ctx, "allreduce", t, req)
}

// waitsAtOnce says whether a blocking operation may be driven: its
// caller's wait can never end early, so the caller may as well run the
// engine's cycles itself (see Runtime.submit).
func waitsAtOnce(ctx context.Context) bool { return ctx.Done() == nil }

// GroupedAllreduceAsync all-reduces the tensors ts as one unit: they are
// negotiated together, fused together where their dtypes allow, and their
// handles (one per tensor, in the order of ts) complete together. Every
// rank passes the same set of names.
func (r *Runtime) GroupedAllreduceAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	hs := make([]*Handle, len(ts))
	names := make([]string, len(ts))
	for i, t := range ts {
		if err := t.validate(); err != nil {
			for j := range hs {
				hs[j] = failedHandle(nameOf(ts[j]), err)
			}
			return hs
		}
		names[i] = t.Name
	}
	group := groupID(names)
	for i, t := range ts {
		req := request(t, engine.KindAllreduce)
		req.ReduceOp, req.Prescale, req.Postscale = op, o.Prescale, o.Postscale
		req.Group, req.GroupSize = group, len(ts)
		hs[i] = r.submit("allreduce", t, req, inPlace(t), false)
	}
	return hs
}

// GroupedAllreduce is GroupedAllreduceAsync followed by waiting for every
// handle; it returns the first error.
func (r *Runtime) GroupedAllreduce(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) error {
	var first error
	for _, h := range r.GroupedAllreduceAsync(ts, op, o) {
		if err := h.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// groupID derives a group's id from its member names, so that every rank
// computes the same one whatever order it lists them in.
func groupID(names []string) uint64 {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	h := fnv.New64a()
	for _, n := range sorted {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return max(h.Sum64(), 1) // 0 means "no group"
}

// BroadcastAsync starts an in-place broadcast of root's t to every rank.
func (r *Runtime) BroadcastAsync(t *Tensor, root int) *Handle {
	return r.broadcast(t, root, false)
}

func (r *Runtime) broadcast(t *Tensor, root int, driven bool) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	req := request(t, engine.KindBroadcast)
	req.Root = root
	return r.submit("broadcast", t, req, inPlace(t), driven)
}

// Broadcast is BroadcastAsync followed by Wait.
func (r *Runtime) Broadcast(ctx context.Context, t *Tensor, root int) error {
	return r.broadcast(t, root, waitsAtOnce(ctx)).Wait(ctx)
}

// AllgatherAsync concatenates every rank's t along the first dimension, in
// rank order; ranks may contribute different numbers of rows. The result
// is the handle's Output, named like t.
func (r *Runtime) AllgatherAsync(t *Tensor) *Handle { return r.allgather(t, false) }

func (r *Runtime) allgather(t *Tensor, driven bool) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("allgather", t, request(t, engine.KindAllgather), result(t), driven)
}

// Allgather is AllgatherAsync followed by Wait; it returns the result.
func (r *Runtime) Allgather(ctx context.Context, t *Tensor) (*Tensor, error) {
	h := r.allgather(t, waitsAtOnce(ctx))
	err := h.Wait(ctx)
	return h.Output(), err
}

// ReduceScatterAsync reduces t across ranks with op and gives each rank its
// share of the first dimension (split as evenly as possible, earlier ranks
// taking the extra rows) as the handle's Output. t is left unchanged.
func (r *Runtime) ReduceScatterAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	return r.reduceScatter(t, op, o, false)
}

func (r *Runtime) reduceScatter(t *Tensor, op kernels.Op, o ReduceOptions, driven bool) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	req := request(t, engine.KindReducescatter)
	req.ReduceOp, req.Prescale, req.Postscale = op, o.Prescale, o.Postscale
	return r.submit("reducescatter", t, req, result(t), driven)
}

// ReduceScatter is ReduceScatterAsync followed by Wait; it returns this
// rank's share.
func (r *Runtime) ReduceScatter(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) (*Tensor, error) {
	h := r.reduceScatter(t, op, o, waitsAtOnce(ctx))
	err := h.Wait(ctx)
	return h.Output(), err
}

// AlltoallAsync sends splits[p] rows of t (in order along the first
// dimension) to rank p and concatenates the rows received from every rank,
// in rank order, into the handle's Output. nil splits divide the rows
// evenly (they must divide). t is left unchanged. Splits that do not fit
// fail the operation on every rank.
func (r *Runtime) AlltoallAsync(t *Tensor, splits []int) *Handle {
	return r.alltoall(t, splits, false)
}

func (r *Runtime) alltoall(t *Tensor, splits []int, driven bool) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	req := request(t, engine.KindAlltoall)
	req.Splits = splits
	return r.submit("alltoall", t, req, result(t), driven)
}

// Alltoall is AlltoallAsync followed by Wait; it returns the received rows.
func (r *Runtime) Alltoall(ctx context.Context, t *Tensor, splits []int) (*Tensor, error) {
	h := r.alltoall(t, splits, waitsAtOnce(ctx))
	err := h.Wait(ctx)
	return h.Output(), err
}

// barrierName is the name every rank's Barrier negotiates.
const barrierName = "hvd/barrier"

// Barrier returns once every rank has called it.
func (r *Runtime) Barrier(ctx context.Context) error {
	req := engine.Request{Name: barrierName, Kind: engine.KindBarrier}
	return r.submit("barrier", nil, req, func([]byte, []int) *Tensor { return nil }, waitsAtOnce(ctx)).Wait(ctx)
}

func nameOf(t *Tensor) string {
	if t == nil {
		return ""
	}
	return t.Name
}
