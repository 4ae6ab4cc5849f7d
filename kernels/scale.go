package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Scale multiplies every element of buf, which holds elements of type dt, by
// factor in place. It serves the pre- and post-scale factors of a collective
// and Average (a sum followed by Scale with 1/n).
//
// Floating-point types multiply in their own working precision: float64 by
// factor, float32 by float32(factor), and float16/bfloat16 are widened to
// float32, multiplied by float32(factor) and narrowed back with
// round-to-nearest-even. IEEE rules apply, so a NaN or infinite factor is
// allowed.
//
// Integer types compute math.RoundToEven(float64(x)*factor) (round to
// nearest, ties to even, where Horovod truncates toward zero) and clamp the
// result to the type's range (uint8: [0, 255]). Products are formed in
// float64, so an int64 whose magnitude exceeds 2^53 may lose low bits. A
// NaN or infinite factor gives an error wrapping ErrFactor and leaves buf
// unchanged.
//
// A factor that is exactly 1 in the working precision leaves buf untouched
// (no pass over memory). An invalid dt wraps ErrDType; a buffer that is not
// a whole number of elements wraps ErrLength, one that is not aligned to the
// element size wraps ErrAlign.
func Scale(dt DType, buf []byte, factor float64) error {
	if !dt.Valid() {
		return fmt.Errorf("%w: %v", ErrDType, dt)
	}
	if err := checkElems("scale", dt, buf); err != nil {
		return err
	}
	if !dt.IsFloat() && (math.IsNaN(factor) || math.IsInf(factor, 0)) {
		return fmt.Errorf("%w: %v for %s", ErrFactor, factor, dt)
	}
	if factor == 1 || (dt.IsFloat() && dt != F64 && float32(factor) == 1) {
		return nil
	}
	switch dt {
	case F32:
		scaleF32(FromBytes[float32](buf), float32(factor))
	case F64:
		scaleF64(FromBytes[float64](buf), factor)
	case F16:
		scaleF16(FromBytes[Float16](buf), float32(factor))
	case BF16:
		scaleBF16(FromBytes[BFloat16](buf), float32(factor))
	case I32:
		scaleInt(FromBytes[int32](buf), factor)
	case I64:
		scaleInt(FromBytes[int64](buf), factor)
	case U8:
		scaleInt(FromBytes[uint8](buf), factor)
	}
	return nil
}

// scaleFloat is the plain multiplying loop, which the gc compiler does not
// vectorise (see BenchmarkScaleImpl); scaleF32 and scaleF64 use it where
// the build has no assembly.
func scaleFloat[T float32 | float64](buf []T, factor T) {
	for i := range buf {
		buf[i] *= factor
	}
}

// scaleF16 widens, scales and narrows each element in one pass.
func scaleF16(buf []Float16, factor float32) {
	t := f16Table()
	for i, h := range buf {
		v := math.Float32bits(math.Float32frombits(t[h]) * factor)
		n, ok := f32ToF16Normal(v) // inlined fast path; see F32ToF16
		if !ok {
			n = f32ToF16Bits(v)
		}
		buf[i] = Float16(n)
	}
}

// scaleBF16 is scaleF16 for bfloat16.
func scaleBF16(buf []BFloat16, factor float32) {
	for i, b := range buf {
		buf[i] = BFloat16(f32ToBF16Bits(math.Float32bits(b.Float32() * factor)))
	}
}

// scaleInt rounds each product to nearest (ties to even) and saturates.
// float64(maxT) is exact for int32 and uint8 and is 2^63 for int64, so each
// comparison picks exactly the values that do not fit.
func scaleInt[T int32 | int64 | uint8](buf []T, factor float64) {
	lo, hi := intRange[T]()
	flo, fhi := float64(lo), float64(hi)
	for i, x := range buf {
		v := math.RoundToEven(float64(x) * factor)
		switch {
		case v >= fhi:
			buf[i] = hi
		case v <= flo:
			buf[i] = lo
		default:
			buf[i] = T(v)
		}
	}
}

// intRange returns the smallest and largest values of T.
func intRange[T int32 | int64 | uint8]() (lo, hi T) {
	var zero T
	if ^zero > 0 { // unsigned
		return 0, ^zero
	}
	lo = T(1) << (8*unsafe.Sizeof(zero) - 1) // only the sign bit set
	return lo, ^lo
}
