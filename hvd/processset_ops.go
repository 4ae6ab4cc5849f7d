package hvd

import (
	"context"
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/kernels"
)

// The collectives of a process set. Each is its Runtime namesake run by
// the set's ranks alone (see ProcessSet): Size, Average's divisor and rank
// orders (all-gather's rows, all-to-all's splits) are the set's, in the
// order of Ranks. On a rank outside the set, or after the set was removed,
// each fails at once without submitting anything.

// AllreduceAsync is Runtime.AllreduceAsync among the set's ranks.
func (ps *ProcessSet) AllreduceAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	v, err := ps.member("allreduce", nameOf(t))
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return v.AllreduceAsync(t, op, o)
}

// Allreduce is Runtime.Allreduce among the set's ranks.
func (ps *ProcessSet) Allreduce(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) error {
	v, err := ps.member("allreduce", nameOf(t))
	if err != nil {
		return err
	}
	return v.Allreduce(ctx, t, op, o)
}

// AllreduceIntoAsync is Runtime.AllreduceIntoAsync among the set's ranks.
func (ps *ProcessSet) AllreduceIntoAsync(in, out *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	v, err := ps.member("allreduce", nameOf(in))
	if err != nil {
		return failedHandle(nameOf(in), err)
	}
	return v.AllreduceIntoAsync(in, out, op, o)
}

// AllreduceInto is Runtime.AllreduceInto among the set's ranks.
func (ps *ProcessSet) AllreduceInto(ctx context.Context, in, out *Tensor, op kernels.Op, o ReduceOptions) error {
	v, err := ps.member("allreduce", nameOf(in))
	if err != nil {
		return err
	}
	return v.AllreduceInto(ctx, in, out, op, o)
}

// BroadcastAsync is Runtime.BroadcastAsync among the set's ranks: root is
// the job's rank of the set's rank that sends, and must be in the set.
func (ps *ProcessSet) BroadcastAsync(t *Tensor, root int) *Handle {
	v, i, err := ps.root(nameOf(t), root)
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return v.BroadcastAsync(t, i)
}

// Broadcast is BroadcastAsync followed by Wait.
func (ps *ProcessSet) Broadcast(ctx context.Context, t *Tensor, root int) error {
	v, i, err := ps.root(nameOf(t), root)
	if err != nil {
		return err
	}
	return v.Broadcast(ctx, t, i)
}

// root returns the set's runtime and the set's index of the job's rank
// root.
func (ps *ProcessSet) root(name string, root int) (*Runtime, int, error) {
	v, err := ps.member("broadcast", name)
	if err != nil {
		return nil, -1, err
	}
	i := slices.Index(ps.ranks, root)
	if i < 0 {
		return nil, -1, invalidArgument(fmt.Errorf("hvd: broadcast %q on rank %d: root rank %d is not in %v",
			name, ps.parent.Rank(), root, ps))
	}
	return v, i, nil
}

// AllgatherAsync is Runtime.AllgatherAsync among the set's ranks: the rows
// come in the order of Ranks.
func (ps *ProcessSet) AllgatherAsync(t *Tensor) *Handle {
	v, err := ps.member("allgather", nameOf(t))
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return v.AllgatherAsync(t)
}

// Allgather is Runtime.Allgather among the set's ranks.
func (ps *ProcessSet) Allgather(ctx context.Context, t *Tensor) (*Tensor, error) {
	v, err := ps.member("allgather", nameOf(t))
	if err != nil {
		return nil, err
	}
	return v.Allgather(ctx, t)
}

// ReduceScatterAsync is Runtime.ReduceScatterAsync among the set's ranks:
// the set's rank i (see Rank) gets the i-th share.
func (ps *ProcessSet) ReduceScatterAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	v, err := ps.member("reducescatter", nameOf(t))
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return v.ReduceScatterAsync(t, op, o)
}

// ReduceScatter is Runtime.ReduceScatter among the set's ranks.
func (ps *ProcessSet) ReduceScatter(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) (*Tensor, error) {
	v, err := ps.member("reducescatter", nameOf(t))
	if err != nil {
		return nil, err
	}
	return v.ReduceScatter(ctx, t, op, o)
}

// AlltoallAsync is Runtime.AlltoallAsync among the set's ranks: splits has
// one entry per rank of the set, in the order of Ranks.
func (ps *ProcessSet) AlltoallAsync(t *Tensor, splits []int) *Handle {
	v, err := ps.member("alltoall", nameOf(t))
	if err != nil {
		return failedHandle(nameOf(t), err)
	}
	return v.AlltoallAsync(t, splits)
}

// Alltoall is Runtime.Alltoall among the set's ranks.
func (ps *ProcessSet) Alltoall(ctx context.Context, t *Tensor, splits []int) (*Tensor, error) {
	v, err := ps.member("alltoall", nameOf(t))
	if err != nil {
		return nil, err
	}
	return v.Alltoall(ctx, t, splits)
}

// GroupedAllreduceAsync is Runtime.GroupedAllreduceAsync among the set's
// ranks.
func (ps *ProcessSet) GroupedAllreduceAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	v, err := ps.member("allreduce", groupName(ts))
	if err != nil {
		return failedHandles(ts, err)
	}
	return v.GroupedAllreduceAsync(ts, op, o)
}

// GroupedAllreduce is GroupedAllreduceAsync followed by waiting for every
// handle; it returns the first error.
func (ps *ProcessSet) GroupedAllreduce(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) error {
	return waitAll(ctx, ps.GroupedAllreduceAsync(ts, op, o))
}

// GroupedAllgatherAsync is Runtime.GroupedAllgatherAsync among the set's
// ranks.
func (ps *ProcessSet) GroupedAllgatherAsync(ts []*Tensor) []*Handle {
	v, err := ps.member("allgather", groupName(ts))
	if err != nil {
		return failedHandles(ts, err)
	}
	return v.GroupedAllgatherAsync(ts)
}

// GroupedAllgather is GroupedAllgatherAsync followed by waiting for every
// handle; it returns the results in the order of ts.
func (ps *ProcessSet) GroupedAllgather(ctx context.Context, ts []*Tensor) ([]*Tensor, error) {
	return outputs(ctx, ps.GroupedAllgatherAsync(ts))
}

// GroupedReduceScatterAsync is Runtime.GroupedReduceScatterAsync among the
// set's ranks.
func (ps *ProcessSet) GroupedReduceScatterAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	v, err := ps.member("reducescatter", groupName(ts))
	if err != nil {
		return failedHandles(ts, err)
	}
	return v.GroupedReduceScatterAsync(ts, op, o)
}

// GroupedReduceScatter is GroupedReduceScatterAsync followed by waiting
// for every handle; it returns this rank's shares in the order of ts.
func (ps *ProcessSet) GroupedReduceScatter(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) ([]*Tensor, error) {
	return outputs(ctx, ps.GroupedReduceScatterAsync(ts, op, o))
}

// Barrier returns once every rank of the set has called it.
func (ps *ProcessSet) Barrier(ctx context.Context) error {
	v, err := ps.member("barrier", barrierName)
	if err != nil {
		return err
	}
	return v.Barrier(ctx)
}

// NewDistributedOptimizer wraps inner to average gradients among the set's
// ranks (see the package function NewDistributedOptimizer): every rank of
// the set wraps optimizers over the same parameters with the same
// options. The optimizer stops working when the set is removed.
func (ps *ProcessSet) NewDistributedOptimizer(inner Optimizer, opts DistributedOptions) (*DistributedOptimizer, error) {
	v, err := ps.member("DistributedOptimizer", "")
	if err != nil {
		return nil, err
	}
	return NewDistributedOptimizer(inner, v, opts)
}

// groupName names a group in errors: its first tensor's name.
func groupName(ts []*Tensor) string {
	if len(ts) == 0 {
		return ""
	}
	return nameOf(ts[0])
}

// failedHandles is one handle per tensor of ts, each failed with err.
func failedHandles(ts []*Tensor, err error) []*Handle {
	hs := make([]*Handle, len(ts))
	for i, t := range ts {
		hs[i] = failedHandle(nameOf(t), err)
	}
	return hs
}
