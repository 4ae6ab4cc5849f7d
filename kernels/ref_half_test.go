package kernels

import "math"

// Reference half-precision conversions, written from the format definitions
// with float64 arithmetic and math.Ldexp instead of bit tricks, so that they
// share no code or technique with half.go.

// halfFormat describes a binary floating-point format narrower than float32.
type halfFormat struct {
	mantBits int // explicit fraction bits
	minExp   int // exponent of the smallest normal value
	maxExp   int // exponent of the largest finite value
}

var (
	fmtF16  = halfFormat{mantBits: 10, minExp: -14, maxExp: 15}
	fmtBF16 = halfFormat{mantBits: 7, minExp: -126, maxExp: 127}
)

// refDecode returns the value of a bit pattern of format f as a float64.
func (f halfFormat) refDecode(bits uint16) float64 {
	expBits := 15 - f.mantBits
	mant := int(bits) & (1<<f.mantBits - 1)
	e := int(bits>>f.mantBits) & (1<<expBits - 1)
	var v float64
	switch {
	case e == 1<<expBits-1 && mant != 0:
		v = math.NaN()
	case e == 1<<expBits-1:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(mant), f.minExp-f.mantBits)
	default:
		v = math.Ldexp(float64(mant+1<<f.mantBits), e-(f.maxExp)-f.mantBits)
	}
	if bits&0x8000 != 0 {
		v = -v
	}
	return v
}

// refRound rounds x to the nearest value of format f, ties to even, and
// returns it as a float64 (±Inf on overflow, NaN for NaN).
func (f halfFormat) refRound(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	a := math.Abs(x)
	_, exp := math.Frexp(a) // a = frac·2^exp, frac in [0.5, 1)
	e := max(exp-1, f.minExp)
	ulp := math.Ldexp(1, e-f.mantBits)
	v := math.RoundToEven(a/ulp) * ulp
	if v >= math.Ldexp(1, f.maxExp+1) {
		v = math.Inf(1)
	}
	return math.Copysign(v, x)
}

// refEncode returns the bit pattern of v, which must be a value of format f
// (as produced by refRound); NaN becomes the canonical quiet NaN.
func (f halfFormat) refEncode(v float64) uint16 {
	expBits := 15 - f.mantBits
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
	}
	a := math.Abs(v)
	allOnes := uint16(1<<expBits-1) << f.mantBits
	switch {
	case math.IsNaN(v):
		return sign | allOnes | 1<<(f.mantBits-1)
	case math.IsInf(v, 0):
		return sign | allOnes
	case a < math.Ldexp(1, f.minExp):
		return sign | uint16(a/math.Ldexp(1, f.minExp-f.mantBits))
	}
	_, exp := math.Frexp(a)
	e := exp - 1
	mant := a/math.Ldexp(1, e-f.mantBits) - math.Ldexp(1, f.mantBits)
	return sign | uint16(e+f.maxExp)<<f.mantBits | uint16(mant)
}

// refNarrow is refEncode(refRound(x)).
func (f halfFormat) refNarrow(x float64) uint16 { return f.refEncode(f.refRound(x)) }

// isNaN16 reports whether bits is a NaN pattern of format f.
func (f halfFormat) isNaN16(bits uint16) bool {
	return math.IsNaN(f.refDecode(bits))
}
