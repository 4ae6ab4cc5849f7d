//go:build !cuda

package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// deviceState is the runtime's GPU state: none without CUDA.
type deviceState struct{}

// closeDevice releases the GPU state: nothing to release without CUDA.
func (r *Runtime) closeDevice() {}

func noCUDA(op, name string) error {
	return fmt.Errorf("hvd: %s of device tensor %q: %w", op, name, ErrNoCUDA)
}

func (r *Runtime) allreduceDevice(t *DeviceTensor, _ kernels.Op, _ ReduceOptions) *Handle {
	return failedHandle(t.Name, noCUDA("allreduce", t.Name))
}

func (r *Runtime) broadcastDevice(t *DeviceTensor, _ int) *Handle {
	return failedHandle(t.Name, noCUDA("broadcast", t.Name))
}

func (r *Runtime) allgatherDevice(_ context.Context, t *DeviceTensor) (*DeviceTensor, error) {
	return nil, noCUDA("allgather", t.Name)
}

func (r *Runtime) allocDevice(t *DeviceTensor) error { return noCUDA("allocation", t.Name) }

func (r *Runtime) freeDevice(t *DeviceTensor) error { return noCUDA("free", t.Name) }

// Device returns the device this rank should pin: in a build without CUDA
// it is always the CPU. (With -tags cuda it is GPU LocalRank % the GPUs
// this process sees.)
func (r *Runtime) Device() Device { return Device{GPU: -1} }
