package kernels

import (
	"fmt"
	"unsafe"
)

// checkElems verifies that b holds a whole number of dt elements and starts
// at an address aligned to the element size; what names the operation in
// the error. dt must be valid.
func checkElems(what string, dt DType, b []byte) error {
	sz := dt.Size()
	if len(b)%sz != 0 {
		return fmt.Errorf("%w: %s: %d bytes is not a whole number of %d-byte %s elements", ErrLength, what, len(b), sz, dt)
	}
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); len(b) > 0 && p%uintptr(sz) != 0 {
		return fmt.Errorf("%w: %s: %s buffer at %#x is not %d-byte aligned", ErrAlign, what, dt, p, sz)
	}
	return nil
}
