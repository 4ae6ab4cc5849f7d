package main

import (
	"context"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// job is what the sweep runs on: the collectives it measures and those
// it coordinates the ranks with, all through one path.
type job interface {
	rank() int
	size() int
	// allreduce is the call measured: buf of dt, reduced with op.
	allreduce(ctx context.Context, dt kernels.DType, buf []byte, op kernels.Op) error
	// proceed returns rank 0's local on every rank.
	proceed(ctx context.Context, local bool) (bool, error)
	barrier(ctx context.Context) error
	// maxOf and sumOf reduce a few numbers across the ranks, in place.
	maxOf(ctx context.Context, xs []float64) error
	sumOf(ctx context.Context, xs []int64) error
}

// commJob runs everything on the communicator itself (-via comm). With
// parts > 1 the measured buffer is cut into that many tensors of nearly
// equal size and reduced as one fused batch (AllreduceVec), as the
// engine reduces a training step's gradients.
type commJob struct {
	c     *collective.Comm
	parts int
	ps    [][]byte
}

func (j *commJob) rank() int { return j.c.Rank() }
func (j *commJob) size() int { return j.c.Size() }

func (j *commJob) allreduce(ctx context.Context, dt kernels.DType, buf []byte, op kernels.Op) error {
	if j.parts <= 1 {
		return j.c.Allreduce(ctx, dt, buf, op, collective.ReduceOptions{})
	}
	j.ps = cutParts(buf, dt.Size(), j.parts, j.ps[:0])
	return j.c.AllreduceVec(ctx, dt, j.ps, op, collective.ReduceOptions{})
}

// cutParts appends to ps the k pieces of buf, whole elements of esz bytes
// each, nearly equal, and returns it (fewer when buf has fewer elements).
func cutParts(buf []byte, esz, k int, ps [][]byte) [][]byte {
	n := len(buf) / esz
	k = max(1, min(k, n))
	for i := range k {
		lo, hi := n*i/k*esz, n*(i+1)/k*esz
		ps = append(ps, buf[lo:hi])
	}
	return ps
}

func (j *commJob) proceed(ctx context.Context, local bool) (bool, error) {
	flag := []uint8{0}
	if local {
		flag[0] = 1
	}
	err := collective.Broadcast(ctx, j.c, flag, 0)
	return flag[0] == 1, err
}

func (j *commJob) barrier(ctx context.Context) error { return j.c.Barrier(ctx) }

func (j *commJob) maxOf(ctx context.Context, xs []float64) error {
	return collective.Allreduce(ctx, j.c, xs, kernels.Max, collective.ReduceOptions{})
}

func (j *commJob) sumOf(ctx context.Context, xs []int64) error {
	return collective.Allreduce(ctx, j.c, xs, kernels.Sum, collective.ReduceOptions{})
}

// hvdJob runs everything through the runtime's engine (-via hvd): the
// measured call is a blocking hvd.Allreduce of a named tensor, as a
// training loop's metric or a one-tensor step makes it, with the
// negotiation and the response cache it goes through. The tensor is made
// once per buffer, as a training loop keeps its tensors.
type hvdJob struct {
	rt *hvd.Runtime
	t  *hvd.Tensor // the measured tensor, over the current buffer
}

func (j *hvdJob) rank() int { return j.rt.Rank() }
func (j *hvdJob) size() int { return j.rt.Size() }

func (j *hvdJob) allreduce(ctx context.Context, dt kernels.DType, buf []byte, op kernels.Op) error {
	if j.t == nil || j.t.DType != dt || len(j.t.Data) != len(buf) || len(buf) > 0 && &j.t.Data[0] != &buf[0] {
		j.t = &hvd.Tensor{Name: "bench/allreduce", DType: dt, Shape: []int{len(buf) / dt.Size()}, Data: buf}
	}
	return j.rt.Allreduce(ctx, j.t, op, hvd.ReduceOptions{})
}

func (j *hvdJob) proceed(ctx context.Context, local bool) (bool, error) {
	flag := []uint8{0}
	if local {
		flag[0] = 1
	}
	err := j.rt.Broadcast(ctx, hvd.NewTensor("bench/proceed", flag), 0)
	return flag[0] == 1, err
}

func (j *hvdJob) barrier(ctx context.Context) error { return j.rt.Barrier(ctx) }

func (j *hvdJob) maxOf(ctx context.Context, xs []float64) error {
	return j.rt.Allreduce(ctx, hvd.NewTensor("bench/max", xs), kernels.Max, hvd.ReduceOptions{})
}

func (j *hvdJob) sumOf(ctx context.Context, xs []int64) error {
	return j.rt.Allreduce(ctx, hvd.NewTensor("bench/sum", xs), kernels.Sum, hvd.ReduceOptions{})
}
