package collective

import (
	"context"

	"github.com/gorovod/gorovod/kernels"
)

// Allreduce reduces data element-wise across all ranks in place; see
// Comm.Allreduce.
func Allreduce[T kernels.Element](ctx context.Context, c *Comm, data []T, op kernels.Op, o ReduceOptions) error {
	return c.Allreduce(ctx, kernels.DTypeOf[T](), kernels.AsBytes(data), op, o)
}

// ReduceScatter reduces data across all ranks and leaves rank i's chunk of
// the result in chunk i of data; see Comm.ReduceScatter.
func ReduceScatter[T kernels.Element](ctx context.Context, c *Comm, data []T, counts []int, op kernels.Op, o ReduceOptions) error {
	return c.ReduceScatter(ctx, kernels.DTypeOf[T](), kernels.AsBytes(data), counts, op, o)
}

// Allgather gathers every rank's chunk of data in place; see Comm.Allgather.
func Allgather[T kernels.Element](ctx context.Context, c *Comm, data []T, counts []int) error {
	return c.Allgather(ctx, kernels.DTypeOf[T](), kernels.AsBytes(data), counts)
}

// Broadcast copies root's data to every rank; see Comm.Broadcast.
func Broadcast[T kernels.Element](ctx context.Context, c *Comm, data []T, root int) error {
	return c.Broadcast(ctx, kernels.AsBytes(data), root)
}

// Alltoall exchanges blocks between all ranks; see Comm.Alltoall.
func Alltoall[T kernels.Element](ctx context.Context, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return c.Alltoall(ctx, kernels.DTypeOf[T](), kernels.AsBytes(send), sendCounts, kernels.AsBytes(recv), recvCounts)
}
