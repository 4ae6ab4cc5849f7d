package kernels

import "math"

// Bit layout constants of binary16 and binary32.
const (
	f16SignMask = 0x8000
	f16ExpMask  = 0x7c00 // also the bit pattern of +Inf
	f16QuietNaN = 0x7e00 // exponent all ones plus the quiet bit
	f32ExpMask  = 0x7f800000
	f32AbsMask  = 0x7fffffff
	f32QuietBit = 0x00400000
)

// Float32 widens h to float32. Every binary16 value is exactly representable
// as a float32, so this is exact; a NaN stays a NaN with its payload and the
// quiet bit set (as the x86 F16C instructions do).
func (h Float16) Float32() float32 {
	return math.Float32frombits(f16ToF32Bits(uint16(h)))
}

// f16ToF32Bits decodes one binary16 pattern into binary32 bits. The 13-bit
// left shift moves sign-less exponent and mantissa into float32 position;
// rebiasing is a multiplication by 2^112, which also normalises subnormals.
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&f16SignMask) << 16
	rest := uint32(h&^f16SignMask) << 13
	if rest >= f16ExpMask<<13 { // Inf or NaN: exponent all ones
		if rest != f16ExpMask<<13 {
			rest |= f32QuietBit
		}
		return sign | f32ExpMask | rest
	}
	return sign | math.Float32bits(math.Float32frombits(rest)*0x1p112)
}

// ToFloat16 narrows f to binary16, rounding to nearest with ties to even.
// Magnitudes that round to 65520 or beyond become ±Inf, tiny values become
// subnormals or ±0, and a NaN becomes a quiet NaN that keeps the sign and the
// top payload bits.
func ToFloat16(f float32) Float16 {
	return Float16(f32ToF16Bits(math.Float32bits(f)))
}

// f32ToF16Bits is ToFloat16 on raw bits.
func f32ToF16Bits(b uint32) uint16 {
	if h, ok := f32ToF16Normal(b); ok {
		return h
	}
	return uint16(b>>16)&f16SignMask | f32ToF16Rare(b&f32AbsMask)
}

// f32ToF16Normal narrows b when the result is a normal binary16 value (or
// the Inf that rounding up the largest one gives), and reports false for
// everything else. It is small enough to be inlined into the bulk loops.
func f32ToF16Normal(b uint32) (uint16, bool) {
	const (
		minNorm = (127 - 14) << 23 // 2^-14: smallest normal binary16
		rebias  = (127 - 15) << 23
	)
	abs := b & f32AbsMask
	if abs-minNorm >= 30<<23 { // outside [2^-14, 2^16); unsigned, so one compare
		return 0, false
	}
	// Round half to even on the 13 dropped bits; a carry out of the
	// mantissa correctly bumps the exponent (up to Inf).
	abs = abs - rebias + 0xfff + (abs>>13)&1
	return uint16(b>>16)&f16SignMask | uint16(abs>>13), true
}

// f32ToF16Rare narrows a non-negative float32 (as bits) that is NaN,
// infinite, too large, or below the normal binary16 range.
func f32ToF16Rare(b uint32) uint16 {
	const (
		overflow = (127 + 16) << 23 // 2^16: everything from here is Inf
		// Adding 0.5 (as float32) aligns the binary16 subnormal grid (2^-24)
		// with the float32 ulp of 0.5, so the FPU does the RNE for us.
		half = (127 - 1) << 23
	)
	switch {
	case b > f32ExpMask: // NaN: keep the top payload bits, set the quiet bit
		return f16QuietNaN | uint16(b>>13)&0x3ff
	case b >= overflow:
		return f16ExpMask
	}
	sum := math.Float32frombits(b) + math.Float32frombits(half)
	return uint16(math.Float32bits(sum) - half)
}

// Float32 widens b to float32 (exact: bfloat16 is the top half of a float32).
func (b BFloat16) Float32() float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// ToBFloat16 narrows f to bfloat16, rounding to nearest with ties to even.
// Values beyond the largest finite bfloat16 round to ±Inf; a NaN stays a
// (quiet) NaN.
func ToBFloat16(f float32) BFloat16 {
	return BFloat16(f32ToBF16Bits(math.Float32bits(f)))
}

// f32ToBF16Bits is ToBFloat16 on raw bits.
func f32ToBF16Bits(b uint32) uint16 {
	if b&f32AbsMask > f32ExpMask { // NaN: truncation could turn it into Inf
		return uint16(b>>16) | uint16(f32QuietBit>>16)
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
