package hvd

import (
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// DeviceTensor is a named, typed, dense tensor in GPU memory. Ptr is a
// CUDA device pointer (a CUdeviceptr, such as gorgonia.org/cu's DevicePtr
// or kernels/cuda's Buffer.Ptr) on this rank's GPU (Runtime.Device),
// holding Count() elements in row-major order. Device tensors need a
// build with -tags cuda; without it their operations fail with ErrNoCUDA.
type DeviceTensor struct {
	Name  string
	DType kernels.DType
	Shape []int
	Ptr   uintptr
}

// Count is the number of elements the shape describes.
func (t *DeviceTensor) Count() int { return shapeCount(t.Shape) }

// Bytes is the size of the tensor's data.
func (t *DeviceTensor) Bytes() int { return t.Count() * t.DType.Size() }

func (t *DeviceTensor) validate() error {
	if t == nil {
		return fmt.Errorf("%w: nil device tensor", ErrInvalidTensor)
	}
	if err := validateMeta(t.Name, t.DType, t.Shape); err != nil {
		return err
	}
	if t.Ptr == 0 && t.Count() > 0 {
		return fmt.Errorf("%w: device tensor %q has a nil device pointer", ErrInvalidTensor, t.Name)
	}
	return nil
}

func deviceName(t *DeviceTensor) string {
	if t == nil {
		return ""
	}
	return t.Name
}

// stageChunk is the most bytes of a device tensor staged through host
// memory at a time: while one span crosses the network, the next is
// copied device to host and the previous one host to device. Each span is
// one engine operation, so spans much smaller than this cost more in
// negotiation cycles than they save in overlap (BenchmarkDeviceVsHost,
// which sets other sizes on its runtimes to compare them).
const stageChunk = 8 << 20

// span is a byte range of a device tensor that travels as one operation.
type span struct{ off, n int }

// stageSpans cuts bytes (a whole number of elemSize elements) into spans
// of at most chunk bytes, each a whole number of elements. Zero bytes make
// no spans.
func stageSpans(bytes, elemSize, chunk int) []span {
	step := max(chunk/elemSize, 1) * elemSize
	var out []span
	for off := 0; off < bytes; off += step {
		out = append(out, span{off, min(step, bytes-off)})
	}
	return out
}

// spanName is the engine name of span i of n of the tensor called name.
// Every rank cuts a tensor the same way, so the names match across ranks;
// both numbers are in the name, so a rank whose tensor has a different
// size submits different names instead of pairing its spans with
// unrelated ones.
func spanName(name string, i, n int) string {
	return fmt.Sprintf("%s#cuda-span-%d-of-%d", name, i, n)
}
