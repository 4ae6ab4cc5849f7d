package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// ReduceOptions scale an all-reduce: inputs are multiplied by Prescale and
// the result by Postscale (zero means 1). Op Average divides by Size.
type ReduceOptions = collective.ReduceOptions

// AllreduceAsync starts an in-place all-reduce of t with op. On success
// every rank's t holds the reduction of all ranks' inputs.
func (r *Runtime) AllreduceAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("allreduce", t.Name, func(ctx context.Context) (*Tensor, error) {
		return t, r.wrap("allreduce", t, r.comm.Allreduce(ctx, t.DType, t.Data, op, o))
	})
}

// Allreduce is AllreduceAsync followed by Wait.
func (r *Runtime) Allreduce(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) error {
	return r.AllreduceAsync(t, op, o).Wait(ctx)
}

// BroadcastAsync starts an in-place broadcast of root's t to every rank.
func (r *Runtime) BroadcastAsync(t *Tensor, root int) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("broadcast", t.Name, func(ctx context.Context) (*Tensor, error) {
		return t, r.wrap("broadcast", t, r.comm.Broadcast(ctx, t.Data, root))
	})
}

// Broadcast is BroadcastAsync followed by Wait.
func (r *Runtime) Broadcast(ctx context.Context, t *Tensor, root int) error {
	return r.BroadcastAsync(t, root).Wait(ctx)
}

// AllgatherAsync concatenates every rank's t along the first dimension, in
// rank order; ranks may contribute different numbers of rows. The result
// is the handle's Output, named like t.
func (r *Runtime) AllgatherAsync(t *Tensor) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("allgather", t.Name, func(ctx context.Context) (*Tensor, error) {
		out, err := r.allgather(ctx, t)
		return out, r.wrap("allgather", t, err)
	})
}

// Allgather is AllgatherAsync followed by Wait; it returns the result.
func (r *Runtime) Allgather(ctx context.Context, t *Tensor) (*Tensor, error) {
	h := r.AllgatherAsync(t)
	err := h.Wait(ctx)
	return h.Output(), err
}

func (r *Runtime) allgather(ctx context.Context, t *Tensor) (*Tensor, error) {
	rows, err := r.exchangeInts(ctx, t.Shape[0])
	if err != nil {
		return nil, err
	}
	per, total := t.rowElems(), 0
	counts := make([]int, len(rows))
	for i, n := range rows {
		counts[i], total = int(n)*per, total+int(n)
	}
	out := &Tensor{Name: t.Name, DType: t.DType, Shape: append([]int{total}, t.Shape[1:]...)}
	out.Data = make([]byte, total*per*t.DType.Size())
	off := 0
	for _, n := range counts[:r.Rank()] {
		off += n
	}
	copy(out.Data[off*t.DType.Size():], t.Data)
	return out, r.comm.Allgather(ctx, t.DType, out.Data, counts)
}

// exchangeInts gathers one integer from every rank.
func (r *Runtime) exchangeInts(ctx context.Context, v int) ([]int64, error) {
	all := make([]int64, r.Size())
	all[r.Rank()] = int64(v)
	ones := make([]int, r.Size())
	for i := range ones {
		ones[i] = 1
	}
	return all, collective.Allgather(ctx, r.comm, all, ones)
}

// ReducescatterAsync reduces t across ranks with op and gives each rank its
// share of the first dimension (split as evenly as possible, earlier ranks
// taking the extra rows) as the handle's Output. t is left unchanged.
func (r *Runtime) ReducescatterAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("reducescatter", t.Name, func(ctx context.Context) (*Tensor, error) {
		out, err := r.reducescatter(ctx, t, op, o)
		return out, r.wrap("reducescatter", t, err)
	})
}

// Reducescatter is ReducescatterAsync followed by Wait; it returns this
// rank's share.
func (r *Runtime) Reducescatter(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) (*Tensor, error) {
	h := r.ReducescatterAsync(t, op, o)
	err := h.Wait(ctx)
	return h.Output(), err
}

func (r *Runtime) reducescatter(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) (*Tensor, error) {
	n, per, esz := r.Size(), t.rowElems(), t.DType.Size()
	counts, off := make([]int, n), 0
	for i := range counts {
		rows := t.Shape[0] / n
		if i < t.Shape[0]%n {
			rows++
		}
		counts[i] = rows * per
		if i < r.Rank() {
			off += counts[i]
		}
	}
	work := append([]byte(nil), t.Data...)
	if err := r.comm.ReduceScatter(ctx, t.DType, work, counts, op, o); err != nil {
		return nil, err
	}
	mine := counts[r.Rank()]
	shape := append([]int{mine / max(per, 1)}, t.Shape[1:]...)
	if per == 0 {
		shape[0] = 0
	}
	return &Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: work[off*esz : (off+mine)*esz]}, nil
}

// AlltoallAsync sends splits[p] rows of t (in order along the first
// dimension) to rank p and concatenates the rows received from every rank,
// in rank order, into the handle's Output. nil splits divide the rows
// evenly (they must divide). t is left unchanged.
func (r *Runtime) AlltoallAsync(t *Tensor, splits []int) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(nameOf(t), err)
	}
	return r.submit("alltoall", t.Name, func(ctx context.Context) (*Tensor, error) {
		out, err := r.alltoall(ctx, t, splits)
		return out, r.wrap("alltoall", t, err)
	})
}

// Alltoall is AlltoallAsync followed by Wait; it returns the received rows.
func (r *Runtime) Alltoall(ctx context.Context, t *Tensor, splits []int) (*Tensor, error) {
	h := r.AlltoallAsync(t, splits)
	err := h.Wait(ctx)
	return h.Output(), err
}

func (r *Runtime) alltoall(ctx context.Context, t *Tensor, splits []int) (*Tensor, error) {
	n, per := r.Size(), t.rowElems()
	splits, err := checkSplits(splits, t.Shape[0], n)
	if err != nil {
		r.comm.Abort(err) // the peers would wait for this rank forever
		return nil, err
	}
	send, recvRows := make([]int64, n), make([]int64, n)
	for p, s := range splits {
		send[p] = int64(s)
	}
	ones := make([]int, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := collective.Alltoall(ctx, r.comm, send, ones, recvRows, ones); err != nil {
		return nil, err
	}
	sc, rc, total := make([]int, n), make([]int, n), 0
	for p := range n {
		sc[p], rc[p] = splits[p]*per, int(recvRows[p])*per
		total += int(recvRows[p])
	}
	out := &Tensor{Name: t.Name, DType: t.DType, Shape: append([]int{total}, t.Shape[1:]...)}
	out.Data = make([]byte, total*per*t.DType.Size())
	return out, r.comm.Alltoall(ctx, t.DType, t.Data, sc, out.Data, rc)
}

func checkSplits(splits []int, rows, n int) ([]int, error) {
	if splits == nil {
		if rows%n != 0 {
			return nil, fmt.Errorf("%w: %d rows do not split evenly over %d ranks; pass splits", ErrInvalidTensor, rows, n)
		}
		splits = make([]int, n)
		for i := range splits {
			splits[i] = rows / n
		}
	}
	sum := 0
	for _, s := range splits {
		if s < 0 {
			return nil, fmt.Errorf("%w: negative split in %v", ErrInvalidTensor, splits)
		}
		sum += s
	}
	if len(splits) != n || sum != rows {
		return nil, fmt.Errorf("%w: splits %v must have %d entries adding up to %d rows", ErrInvalidTensor, splits, n, rows)
	}
	return splits, nil
}

// Barrier returns once every rank has called it (after every operation
// submitted before it).
func (r *Runtime) Barrier(ctx context.Context) error {
	return r.submit("barrier", "\x00barrier", func(ctx context.Context) (*Tensor, error) {
		return nil, r.comm.Barrier(ctx)
	}).Wait(ctx)
}

func (r *Runtime) wrap(op string, t *Tensor, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("hvd: %s %q on rank %d: %w", op, t.Name, r.Rank(), err)
}

func nameOf(t *Tensor) string {
	if t == nil {
		return ""
	}
	return t.Name
}
