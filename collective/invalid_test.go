package collective_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// TestInvalidArgumentsKeepTheirCause: an argument that the kernels reject
// fails the operation with an error that holds both ErrInvalid and the
// kernels' own sentinel, so callers can tell which argument was wrong.
func TestInvalidArgumentsKeepTheirCause(t *testing.T) {
	misaligned := make([]byte, 4*4+1)[1:] // Go allocations are 8-byte aligned
	for _, tc := range []struct {
		name string
		call func(c *collective.Comm) error
		want error
	}{
		{"allreduce dtype", func(c *collective.Comm) error {
			return c.Allreduce(context.Background(), kernels.DType(0), make([]byte, 4), kernels.Sum, collective.ReduceOptions{})
		}, kernels.ErrDType},
		{"allreduce op", func(c *collective.Comm) error {
			return c.Allreduce(context.Background(), kernels.F32, make([]byte, 4), kernels.Op(99), collective.ReduceOptions{})
		}, kernels.ErrOp},
		{"allreduce misaligned", func(c *collective.Comm) error {
			return c.Allreduce(context.Background(), kernels.F32, misaligned, kernels.Sum, collective.ReduceOptions{})
		}, kernels.ErrAlign},
		{"allreduce factor", func(c *collective.Comm) error {
			return c.Allreduce(context.Background(), kernels.I32, make([]byte, 4), kernels.Sum, collective.ReduceOptions{Prescale: math.NaN()})
		}, kernels.ErrFactor},
		{"reducescatter op", func(c *collective.Comm) error {
			return c.ReduceScatter(context.Background(), kernels.F32, make([]byte, 4), nil, kernels.Op(99), collective.ReduceOptions{})
		}, kernels.ErrOp},
		{"allgather dtype", func(c *collective.Comm) error {
			return c.Allgather(context.Background(), kernels.DType(0), make([]byte, 4), []int{1})
		}, kernels.ErrDType},
		{"alltoall dtype", func(c *collective.Comm) error {
			return c.Alltoall(context.Background(), kernels.DType(0), make([]byte, 4), []int{1}, make([]byte, 4), []int{1})
		}, kernels.ErrDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := collective.NewComm(memtransport.NewNetwork(1).Transport(0), collective.Options{})
			defer c.Close()
			err := tc.call(c)
			if !errors.Is(err, collective.ErrInvalid) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want one wrapping %v and %v", err, collective.ErrInvalid, tc.want)
			}
			var op *collective.OpError
			if !errors.As(err, &op) || op.Seq != 1 {
				t.Fatalf("err = %v, want an *OpError of operation 1", err)
			}
		})
	}
}
