package hvd

import (
	"context"

	"github.com/gorovod/gorovod/kernels"
)

// AllreduceDeviceAsync starts an in-place all-reduce of the GPU tensor t
// with op, like AllreduceAsync. The tensor travels in spans of up to 8
// MiB staged through page-locked host memory: while one span is reduced
// across ranks, the next is copied from the device and the previous one
// back to it, on their own CUDA streams. Prescale is applied on the GPU
// before a span leaves it, and Postscale (with the 1/Size of Average) after
// it returns. t must stay untouched until the handle is done. In a build
// without CUDA the handle fails with ErrNoCUDA.
func (r *Runtime) AllreduceDeviceAsync(t *DeviceTensor, op kernels.Op, o ReduceOptions) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(deviceName(t), err)
	}
	return r.allreduceDevice(t, op, o)
}

// AllreduceDevice is AllreduceDeviceAsync followed by Wait.
func (r *Runtime) AllreduceDevice(ctx context.Context, t *DeviceTensor, op kernels.Op, o ReduceOptions) error {
	return r.AllreduceDeviceAsync(t, op, o).Wait(ctx)
}

// BroadcastDeviceAsync starts an in-place broadcast of root's GPU tensor t
// to every rank, staged through host memory in spans like
// AllreduceDeviceAsync.
func (r *Runtime) BroadcastDeviceAsync(t *DeviceTensor, root int) *Handle {
	if err := t.validate(); err != nil {
		return failedHandle(deviceName(t), err)
	}
	return r.broadcastDevice(t, root)
}

// BroadcastDevice is BroadcastDeviceAsync followed by Wait.
func (r *Runtime) BroadcastDevice(ctx context.Context, t *DeviceTensor, root int) error {
	return r.BroadcastDeviceAsync(t, root).Wait(ctx)
}

// AllgatherDevice concatenates every rank's GPU tensor t along the first
// dimension, in rank order (ranks may contribute different numbers of
// rows), into a new GPU tensor named like t that the caller releases with
// FreeDevice.
func (r *Runtime) AllgatherDevice(ctx context.Context, t *DeviceTensor) (*DeviceTensor, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	return r.allgatherDevice(ctx, t)
}

// AllocDevice allocates an uninitialised GPU tensor on this rank's device.
func (r *Runtime) AllocDevice(name string, dt kernels.DType, shape ...int) (*DeviceTensor, error) {
	t := &DeviceTensor{Name: name, DType: dt, Shape: shape}
	if err := validateMeta(name, dt, shape); err != nil {
		return nil, err
	}
	return t, r.allocDevice(t)
}

// FreeDevice releases the GPU memory of a tensor that AllocDevice or
// AllgatherDevice made. Freeing nil does nothing.
func (r *Runtime) FreeDevice(t *DeviceTensor) error {
	if t == nil || t.Ptr == 0 {
		return nil
	}
	return r.freeDevice(t)
}

// AllreduceDevice all-reduces the GPU tensor t in place on the default
// runtime.
func AllreduceDevice(ctx context.Context, t *DeviceTensor, op kernels.Op, o ReduceOptions) error {
	rt, h := runtimeFor(deviceName(t))
	if rt == nil {
		return h.Wait(ctx)
	}
	return rt.AllreduceDevice(ctx, t, op, o)
}

// BroadcastDevice copies root's GPU tensor t into every rank's t on the
// default runtime.
func BroadcastDevice(ctx context.Context, t *DeviceTensor, root int) error {
	rt, h := runtimeFor(deviceName(t))
	if rt == nil {
		return h.Wait(ctx)
	}
	return rt.BroadcastDevice(ctx, t, root)
}
