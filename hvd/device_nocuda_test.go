//go:build !cuda

package hvd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestDeviceTensorsNeedCUDA: without -tags cuda every device operation
// fails with ErrNoCUDA naming the tensor, and the device is the CPU.
func TestDeviceTensorsNeedCUDA(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	ctx := context.Background()
	if rt.Device().IsGPU() {
		t.Errorf("Device() = %v without CUDA", rt.Device())
	}
	dt := &hvd.DeviceTensor{Name: "w", DType: kernels.F32, Shape: []int{4}, Ptr: 0x1000}
	_, gerr := rt.AllgatherDevice(ctx, dt)
	_, aerr := rt.AllocDevice("w", kernels.F32, 4)
	for name, err := range map[string]error{
		"allreduce": rt.AllreduceDevice(ctx, dt, kernels.Sum, hvd.ReduceOptions{}),
		"broadcast": rt.BroadcastDevice(ctx, dt, 0),
		"allgather": gerr,
		"alloc":     aerr,
	} {
		if !errors.Is(err, hvd.ErrNoCUDA) || !strings.Contains(err.Error(), `"w"`) || !strings.Contains(err.Error(), "-tags cuda") {
			t.Errorf("%s: err = %v, want ErrNoCUDA naming the tensor and the build tag", name, err)
		}
	}
}

// TestInvalidDeviceTensor: a device tensor without a pointer, name or
// dtype is rejected before anything else.
func TestInvalidDeviceTensor(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	for _, dt := range []*hvd.DeviceTensor{
		nil,
		{Name: "p", DType: kernels.F32, Shape: []int{4}},
		{DType: kernels.F32, Shape: []int{4}, Ptr: 1},
		{Name: "d", Shape: []int{4}, Ptr: 1},
		{Name: "s", DType: kernels.F32, Shape: []int{-1}, Ptr: 1},
	} {
		err := rt.AllreduceDevice(context.Background(), dt, kernels.Sum, hvd.ReduceOptions{})
		if !errors.Is(err, hvd.ErrInvalidTensor) {
			t.Errorf("%+v: err = %v, want ErrInvalidTensor", dt, err)
		}
	}
}
