package hvd

import (
	"context"

	"github.com/gorovod/gorovod/kernels"
)

// Plain-slice helpers: one call on a []T, for code that does not keep
// Tensors (a gradient buffer of another framework, a count, a vector of
// statistics). Each wraps v without copying as a vector tensor named name
// and runs the blocking operation on rt (nil: the default runtime). Every
// rank calls the same helper with the same name (and, but for
// AllgatherSlice, the same length); the name shares the namespace of every
// other tensor in flight. Errors are those of the Tensor operations and
// match the same sentinels (ErrMismatch for lengths that differ between
// ranks, ErrInvalidArgument for a root out of range, ...).

// AllreduceSlice reduces v across the ranks of rt (nil: the default
// runtime) with op, in place: on success every rank's v holds the
// reduction of all ranks' v. See Runtime.Allreduce.
func AllreduceSlice[T kernels.Element](ctx context.Context, rt *Runtime, name string, v []T, op kernels.Op) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	return rt.Allreduce(ctx, NewTensor(name, v), op, ReduceOptions{})
}

// AverageSlice replaces v, in place, by the element-wise mean of every
// rank's v: AllreduceSlice with kernels.Average. On integer slices the mean
// rounds half to even (see ReduceOptions).
func AverageSlice[T kernels.Element](ctx context.Context, rt *Runtime, name string, v []T) error {
	return AllreduceSlice(ctx, rt, name, v, kernels.Average)
}

// BroadcastSlice copies root's v into every rank's v, in place, on rt
// (nil: the default runtime). See Runtime.Broadcast.
func BroadcastSlice[T kernels.Element](ctx context.Context, rt *Runtime, name string, v []T, root int) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	return rt.Broadcast(ctx, NewTensor(name, v), root)
}

// AllgatherSlice returns a new slice holding every rank's v, concatenated
// in rank order, on rt (nil: the default runtime); ranks may pass slices
// of different lengths. v is left unchanged. See Runtime.Allgather.
func AllgatherSlice[T kernels.Element](ctx context.Context, rt *Runtime, name string, v []T) ([]T, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	out, err := rt.Allgather(ctx, NewTensor(name, v))
	if err != nil {
		return nil, err
	}
	if got := Values[T](out); got != nil {
		return got, nil
	}
	return []T{}, nil // every rank's v was empty
}
