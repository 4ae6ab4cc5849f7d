//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"
)

// Buffer is a block of device memory. Ptr is its device address (0 for an
// empty buffer) and Bytes its size; Ptr + k addresses byte k, so a caller
// may hand the kernels and copies any sub-range.
type Buffer struct {
	Ptr   uintptr
	Bytes int
}

// Alloc allocates bytes of device memory (uninitialised; 256-byte aligned).
// Zero bytes gives a Buffer with Ptr 0 and allocates nothing.
func (c *Context) Alloc(bytes int) (*Buffer, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("%w: alloc of %d bytes", ErrArgument, bytes)
	}
	b := &Buffer{Bytes: bytes}
	if bytes == 0 {
		return b, c.do(func() error { return nil }) // still report a closed context
	}
	err := c.do(func() error {
		p, err := cu.MemAlloc(int64(bytes))
		if err != nil {
			return driverErr(fmt.Sprintf("cuMemAlloc(%d bytes)", bytes), err)
		}
		b.Ptr = uintptr(p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free releases b's memory, which must come from c.Alloc, and empties b.
// Freeing nil or an empty Buffer does nothing. Free does not wait for
// queued work that uses b: synchronise first.
func (c *Context) Free(b *Buffer) error {
	if b == nil || b.Ptr == 0 {
		return nil
	}
	return c.do(func() error {
		if err := cu.MemFree(cu.DevicePtr(b.Ptr)); err != nil {
			return driverErr("cuMemFree", err)
		}
		b.Ptr, b.Bytes = 0, 0
		return nil
	})
}
