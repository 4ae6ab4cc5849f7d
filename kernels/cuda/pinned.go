//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// pinned_error returns the driver's name of r ("CUDA_ERROR_OUT_OF_MEMORY").
static const char *pinned_error(CUresult r) {
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) {
		return "unknown CUDA error";
	}
	return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Pinned is page-locked host memory: the GPU reads and writes it directly,
// so copies between it and the device run at full bus speed and overlap
// with other work. It is C memory, never moved or collected by Go.
type Pinned struct {
	p unsafe.Pointer
	n int
}

// AllocPinned allocates bytes of page-locked host memory, visible to every
// context of the process. Zero bytes allocates nothing.
func (c *Context) AllocPinned(bytes int) (*Pinned, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("%w: pinned alloc of %d bytes", ErrArgument, bytes)
	}
	p := &Pinned{n: bytes}
	err := c.do(func() error {
		if bytes == 0 {
			return nil
		}
		if r := C.cuMemAllocHost(&p.p, C.size_t(bytes)); r != C.CUDA_SUCCESS {
			return driverErr(fmt.Sprintf("cuMemAllocHost(%d bytes)", bytes), cError(r))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Bytes returns the whole buffer as a Go slice (nil when empty). The slice
// is valid until FreePinned.
func (p *Pinned) Bytes() []byte {
	if p == nil || p.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p.p), p.n)
}

// FreePinned releases p, which must come from AllocPinned, and empties it;
// slices from p.Bytes must not be used afterwards. Freeing nil or an empty
// Pinned does nothing.
func (c *Context) FreePinned(p *Pinned) error {
	if p == nil || p.p == nil {
		return nil
	}
	return c.do(func() error {
		if r := C.cuMemFreeHost(p.p); r != C.CUDA_SUCCESS {
			return driverErr("cuMemFreeHost", cError(r))
		}
		p.p, p.n = nil, 0
		return nil
	})
}

// cError turns a CUresult into an error carrying the driver's name for it.
func cError(r C.CUresult) error {
	return errors.New(C.GoString(C.pinned_error(r)))
}
