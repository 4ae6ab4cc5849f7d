//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gorovod/gorovod/kernels"
)

// Reduce enqueues dst[i] = op(dst[i], src[i]) for the n elements of type dt
// at device addresses dst and src, with the semantics of kernels.Reduce:
// floats in IEEE arithmetic rounded to nearest even (half types widened to
// float32 and narrowed back), Min and Max propagating NaN with -0 < +0,
// integers wrapping. kernels.Average reduces as kernels.Sum, exactly as on
// the CPU; scale afterwards.
//
// dst and src must be aligned to the element size and may be equal but must
// not otherwise overlap. Any alignment works; the kernel runs at full speed
// when dst and src are equally aligned modulo 16 bytes. s must belong to a
// Context of the same device.
func (c *Context) Reduce(s *Stream, dt kernels.DType, op kernels.Op, dst, src uintptr, n int) error {
	what := "reduce " + op.String()
	if err := checkDType(what, dt); err != nil {
		return err
	}
	if !op.ElementWise() {
		return fmt.Errorf("%w: %s: %w: %v", ErrUnsupported, what, kernels.ErrOp, op)
	}
	if err := c.checkElems(what, s, dt, n, dst, src); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	k := c.mod.reduce[dt][op.Reduction()]
	d, sp, n64 := uint64(dst), uint64(src), uint64(n)
	return c.do(func() error {
		return k.launch(s.s, n, dt.Size(), unsafe.Pointer(&d), unsafe.Pointer(&sp), unsafe.Pointer(&n64))
	})
}

// Scale enqueues buf[i] *= factor for the n elements of type dt at device
// address buf, with the semantics of kernels.Scale: floats multiply in their
// working precision (float64 by factor; float32, float16 and bfloat16 by
// float32(factor), halves widened to float32 and narrowed back); integers
// become math.RoundToEven(float64(x)*factor) saturated to the type's range.
// A NaN or infinite factor for an integer type is an error wrapping
// ErrArgument and kernels.ErrFactor. A factor that is 1 in the working
// precision enqueues nothing.
func (c *Context) Scale(s *Stream, dt kernels.DType, buf uintptr, n int, factor float64) error {
	const what = "scale"
	if err := checkDType(what, dt); err != nil {
		return err
	}
	if err := c.checkElems(what, s, dt, n, buf); err != nil {
		return err
	}
	if !dt.IsFloat() && (math.IsNaN(factor) || math.IsInf(factor, 0)) {
		return fmt.Errorf("%w: %s: %w: %v for %s", ErrArgument, what, kernels.ErrFactor, factor, dt)
	}
	if n == 0 || factor == 1 || (dt.IsFloat() && dt != kernels.F64 && float32(factor) == 1) {
		return nil
	}
	k := c.mod.scale[dt]
	b, n64, f := uint64(buf), uint64(n), factor
	return c.do(func() error {
		return k.launch(s.s, n, dt.Size(), unsafe.Pointer(&b), unsafe.Pointer(&n64), unsafe.Pointer(&f))
	})
}

// Convert enqueues the conversion of n elements of type from at device
// address src into elements of type to at dst, rounding as the CPU
// converters of package kernels do (kernels.F32ToF16 and friends): float32
// to float16 or bfloat16 rounds to nearest even, the widenings are exact.
// The supported pairs are float32 to and from float16 and bfloat16; to ==
// from is a plain copy. Other pairs give an error wrapping ErrUnsupported.
// The ranges must not overlap.
func (c *Context) Convert(s *Stream, dst uintptr, to kernels.DType, src uintptr, from kernels.DType, n int) error {
	what := fmt.Sprintf("convert %s to %s", from, to)
	if err := checkDType(what, from); err != nil {
		return err
	}
	if err := checkDType(what, to); err != nil {
		return err
	}
	if err := c.checkElems(what, s, to, n, dst); err != nil {
		return err
	}
	if n > 0 {
		if err := checkElemPtr(what, from, src); err != nil {
			return err
		}
	}
	if to == from {
		return s.CopyDtoD(dst, src, n*to.Size())
	}
	i := 0
	for i < len(conversions) && (conversions[i].from != from || conversions[i].to != to) {
		i++
	}
	if i == len(conversions) {
		return fmt.Errorf("%w: %s (float32 to and from float16 and bfloat16 only)", ErrUnsupported, what)
	}
	if n == 0 {
		return nil
	}
	k := c.mod.convert[i]
	d, sp, n64 := uint64(dst), uint64(src), uint64(n)
	return c.do(func() error {
		return k.launch(s.s, n, 4, unsafe.Pointer(&d), unsafe.Pointer(&sp), unsafe.Pointer(&n64))
	})
}

// checkDType rejects invalid element types.
func checkDType(what string, dt kernels.DType) error {
	if !dt.Valid() {
		return fmt.Errorf("%w: %s: %w: %v", ErrUnsupported, what, kernels.ErrDType, dt)
	}
	return nil
}

// checkElems validates a kernel call: a usable stream of c's device, a
// non-negative count and, when n > 0, non-null pointers aligned to the
// element size of dt.
func (c *Context) checkElems(what string, s *Stream, dt kernels.DType, n int, ptrs ...uintptr) error {
	switch {
	case c == nil || c.mod == nil:
		return fmt.Errorf("%w: %s: context not made by Open", ErrArgument, what)
	case s == nil || s.c == nil:
		return fmt.Errorf("%w: %s: nil stream", ErrArgument, what)
	case s.closed:
		return fmt.Errorf("%w: %s: stream", ErrClosed, what)
	case s.c.ordinal != c.ordinal:
		return fmt.Errorf("%w: %s: stream of device %d used with device %d", ErrArgument, what, s.c.ordinal, c.ordinal)
	case n < 0:
		return fmt.Errorf("%w: %s: negative count %d", ErrArgument, what, n)
	case n > math.MaxInt/8:
		return fmt.Errorf("%w: %s: count %d too large", ErrArgument, what, n)
	}
	if n == 0 {
		return nil
	}
	for _, p := range ptrs {
		if err := checkElemPtr(what, dt, p); err != nil {
			return err
		}
	}
	return nil
}

// checkElemPtr validates one device pointer to elements of dt.
func checkElemPtr(what string, dt kernels.DType, p uintptr) error {
	if p == 0 {
		return fmt.Errorf("%w: %s: null device pointer", ErrArgument, what)
	}
	if p%uintptr(dt.Size()) != 0 {
		return fmt.Errorf("%w: %s: %w: %s pointer %#x is not %d-byte aligned", ErrArgument, what, kernels.ErrAlign, dt, p, dt.Size())
	}
	return nil
}
