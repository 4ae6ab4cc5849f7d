package hvd

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"unsafe"

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

// AllreduceIntoAsync starts an out-of-place all-reduce: in is reduced
// across ranks with op and the result written into out, which must have
// in's dtype and shape (an error matching ErrInvalidArgument otherwise).
// in is copied into out before AllreduceIntoAsync returns and is not read
// afterwards, so it may be reused at once; out must not be touched until
// the handle completes, and is its Output. The operation is negotiated
// under in's name (out's Name is not used). in and out may be the same
// tensor, or tensors over the same bytes, which is an in-place all-reduce;
// Data slices that partly overlap are an error.
func (r *Runtime) AllreduceIntoAsync(in, out *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	req, err := allreduceIntoRequest(in, out, op, o)
	if err != nil {
		return failedHandle(nameOf(in), err)
	}
	return r.submit("allreduce", out, req, inPlace(out), false)
}

// AllreduceInto is AllreduceIntoAsync followed by Wait.
func (r *Runtime) AllreduceInto(ctx context.Context, in, out *Tensor, op kernels.Op, o ReduceOptions) error {
	if !waitsAtOnce(ctx) {
		return r.AllreduceIntoAsync(in, out, op, o).Wait(ctx)
	}
	req, err := allreduceIntoRequest(in, out, op, o)
	if err != nil {
		return err
	}
	return r.runInPlace(ctx, "allreduce", out, req)
}

// allreduceIntoRequest checks in and out, copies in into out and
// describes the all-reduce of in with op to the engine.
func allreduceIntoRequest(in, out *Tensor, op kernels.Op, o ReduceOptions) (engine.Request, error) {
	req, err := allreduceRequest(in, op, o)
	if err != nil {
		return req, err
	}
	bad := func(format string, args ...any) (engine.Request, error) {
		return engine.Request{}, fmt.Errorf("%w: out-of-place all-reduce of %q: %s", ErrInvalidTensor, in.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case out == nil:
		return bad("nil output tensor")
	case out.DType != in.DType:
		return bad("output dtype %v, input %v", out.DType, in.DType)
	case !slices.Equal(out.shape(), in.shape()):
		return bad("output shape %v, input %v", out.shape(), in.shape())
	case len(out.Data) != len(in.Data):
		return bad("output has %d bytes, input %d", len(out.Data), len(in.Data))
	}
	switch overlap(in.Data, out.Data) {
	case overlapNone:
		copy(out.Data, in.Data)
	case overlapPartial:
		return bad("the input's and output's data partly overlap")
	}
	return req, nil
}

// How two byte slices share memory.
const (
	overlapNone    = iota // disjoint (or empty)
	overlapSame           // the same bytes
	overlapPartial        // some bytes in common, not all
)

// overlap says how a and b share memory.
func overlap(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return overlapNone
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	switch {
	case pa == pb && len(a) == len(b):
		return overlapSame
	case pa+uintptr(len(a)) <= pb || pb+uintptr(len(b)) <= pa:
		return overlapNone
	}
	return overlapPartial
}

// waitsAtOnce says whether a blocking operation may be driven: its
// caller's wait can never end early, so the caller may as well run the
// engine's cycles itself (see Runtime.submit).
func waitsAtOnce(ctx context.Context) bool { return ctx.Done() == nil }

// GroupedAllreduceAsync all-reduces the tensors ts as one unit: they are
// negotiated together, fused together where their dtypes allow, and their
// handles (one per tensor, in the order of ts) complete together; when one
// member fails, every member fails. Every rank passes the same set of
// names, each once.
func (r *Runtime) GroupedAllreduceAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	return r.grouped("allreduce", ts, engine.KindAllreduce, func(req *engine.Request) {
		req.ReduceOp, req.Prescale, req.Postscale = op, o.Prescale, o.Postscale
	}, inPlace)
}

// GroupedAllreduce is GroupedAllreduceAsync followed by waiting for every
// handle; it returns the first error.
func (r *Runtime) GroupedAllreduce(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) error {
	return waitAll(ctx, r.GroupedAllreduceAsync(ts, op, o))
}

// GroupedAllgatherAsync all-gathers each of the tensors ts (see
// AllgatherAsync) as one unit: they are negotiated together and their
// handles (one per tensor, in the order of ts) complete together, after
// the last of them; when one member fails (ranks disagree about its dtype,
// say), every member fails on every rank. The all-gathers themselves run
// one after the other, unfused. Every rank passes the same set of names,
// each once; each handle's Output is its tensor's result.
func (r *Runtime) GroupedAllgatherAsync(ts []*Tensor) []*Handle {
	return r.grouped("allgather", ts, engine.KindAllgather, func(*engine.Request) {}, result)
}

// GroupedAllgather is GroupedAllgatherAsync followed by waiting for every
// handle. It returns the results in the order of ts, or nil and the first
// error.
func (r *Runtime) GroupedAllgather(ctx context.Context, ts []*Tensor) ([]*Tensor, error) {
	return outputs(ctx, r.GroupedAllgatherAsync(ts))
}

// GroupedReduceScatterAsync reduce-scatters each of the tensors ts with op
// (see ReduceScatterAsync) as one unit, the way GroupedAllgatherAsync
// gathers them: negotiated together, completed together, failing
// together, run one after the other. The tensors are left unchanged; each
// handle's Output is this rank's share of its tensor.
func (r *Runtime) GroupedReduceScatterAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	return r.grouped("reducescatter", ts, engine.KindReducescatter, func(req *engine.Request) {
		req.ReduceOp, req.Prescale, req.Postscale = op, o.Prescale, o.Postscale
	}, result)
}

// GroupedReduceScatter is GroupedReduceScatterAsync followed by waiting
// for every handle. It returns this rank's shares in the order of ts, or
// nil and the first error.
func (r *Runtime) GroupedReduceScatter(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) ([]*Tensor, error) {
	return outputs(ctx, r.GroupedReduceScatterAsync(ts, op, o))
}

// grouped submits ts as the members of one group of kind, each described
// by request and set, with the Output out makes of it. A tensor that
// fails validation, or a name given twice, fails every handle at once and
// submits nothing.
func (r *Runtime) grouped(op string, ts []*Tensor, kind engine.Kind, set func(*engine.Request), out func(*Tensor) func([]byte, []int) *Tensor) []*Handle {
	hs := make([]*Handle, len(ts))
	names := make([]string, len(ts))
	seen := make(map[string]bool, len(ts))
	for i, t := range ts {
		err := t.validate()
		if err == nil && seen[t.Name] {
			err = fmt.Errorf("%w: %q is in the group twice", ErrInvalidTensor, t.Name)
		}
		if err != nil {
			for j := range hs {
				hs[j] = failedHandle(nameOf(ts[j]), err)
			}
			return hs
		}
		seen[t.Name], names[i] = true, t.Name
	}
	group := groupID(names)
	for i, t := range ts {
		req := request(t, kind)
		set(&req)
		req.Group, req.GroupSize = group, len(ts)
		hs[i] = r.submit(op, t, req, out(t), false)
	}
	return hs
}

// outputs waits for every handle and returns their Outputs, or nil and
// the first error.
func outputs(ctx context.Context, hs []*Handle) ([]*Tensor, error) {
	if err := waitAll(ctx, hs); err != nil {
		return nil, err
	}
	out := make([]*Tensor, len(hs))
	for i, h := range hs {
		out[i] = h.Output()
	}
	return out, nil
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
