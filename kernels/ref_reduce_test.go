package kernels

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
)

// Reference element arithmetic for the reducer tests: floats are combined
// exactly with math/big and rounded once to the element type (float16 and
// bfloat16 via float32, which is how the package defines them); integers are
// combined exactly with math/big and then wrapped to the type's width.

// decodeFloat returns the value of the float element e of type dt.
func decodeFloat(dt DType, e []byte) float64 {
	switch dt {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(e))
	case F16:
		return fmtF16.refDecode(binary.LittleEndian.Uint16(e))
	default:
		return fmtBF16.refDecode(binary.LittleEndian.Uint16(e))
	}
}

// encodeFloat writes v, which must already be a value of dt, into e.
func encodeFloat(dt DType, e []byte, v float64) {
	switch dt {
	case F32:
		binary.LittleEndian.PutUint32(e, math.Float32bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(e, math.Float64bits(v))
	case F16:
		binary.LittleEndian.PutUint16(e, fmtF16.refEncode(v))
	default:
		binary.LittleEndian.PutUint16(e, fmtBF16.refEncode(v))
	}
}

// roundFloat rounds an exact value to dt: float64 directly, the others to
// float32 first, and float16/bfloat16 from there with the reference rounding.
func roundFloat(dt DType, x *big.Float) float64 {
	if dt == F64 {
		v, _ := x.Float64()
		return v
	}
	v32, _ := x.Float32()
	switch dt {
	case F16:
		return fmtF16.refRound(float64(v32))
	case BF16:
		return fmtBF16.refRound(float64(v32))
	}
	return float64(v32)
}

// refFloat is the expected op(a, b) for the float type dt.
func refFloat(dt DType, op Op, a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	switch op {
	case Min, Max:
		c := big.NewFloat(a).Cmp(big.NewFloat(b)) // fine: no NaN here; Inf is allowed
		if c == 0 && a == 0 {                     // ±0: min prefers -0, max prefers +0
			neg := math.Signbit(a) || math.Signbit(b)
			if op == Max {
				neg = math.Signbit(a) && math.Signbit(b)
			}
			if neg {
				return math.Copysign(0, -1)
			}
			return 0
		}
		if (c < 0) == (op == Min) {
			return a
		}
		return b
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) || a == 0 || b == 0 {
		// Infinities and signed zeros: IEEE float64 arithmetic is exact here
		// (or NaN), and the result is already a value of every type.
		if op == Prod {
			return a * b
		}
		return a + b
	}
	x, y := new(big.Float).SetFloat64(a), new(big.Float).SetFloat64(b)
	z := new(big.Float).SetPrec(4096)
	if op == Prod {
		z.Mul(x, y)
	} else {
		z.Add(x, y)
	}
	if z.Sign() == 0 {
		return 0 // x + (-x) is +0 under round-to-nearest
	}
	return roundFloat(dt, z)
}

// refInt is the expected wrapped op(a, b) for the integer type dt, on the
// little-endian element encodings a, b; it writes the result into out.
func refInt(dt DType, op Op, out, a, b []byte) {
	x, y := decodeInt(dt, a), decodeInt(dt, b)
	z := new(big.Int)
	switch op {
	case Sum, Average:
		z.Add(x, y)
	case Prod:
		z.Mul(x, y)
	case Min:
		z.Set(x)
		if y.Cmp(x) < 0 {
			z.Set(y)
		}
	case Max:
		z.Set(x)
		if y.Cmp(x) > 0 {
			z.Set(y)
		}
	}
	// Two's-complement wrap: keep the low bits of z mod 2^width.
	mod := new(big.Int).Lsh(big.NewInt(1), uint(8*dt.Size()))
	z.Mod(z, mod)
	var le [8]byte
	binary.LittleEndian.PutUint64(le[:], z.Uint64())
	copy(out, le[:dt.Size()])
}

// decodeInt reads a little-endian integer element of dt.
func decodeInt(dt DType, e []byte) *big.Int {
	switch dt {
	case I32:
		return big.NewInt(int64(int32(binary.LittleEndian.Uint32(e))))
	case I64:
		return big.NewInt(int64(binary.LittleEndian.Uint64(e)))
	}
	return big.NewInt(int64(e[0]))
}

// refReduce returns the expected op(a, b) buffer.
func refReduce(dt DType, op Op, a, b []byte) []byte {
	sz := dt.Size()
	out := make([]byte, len(a))
	for i := 0; i < len(a); i += sz {
		if !dt.IsFloat() {
			refInt(dt, op.Reduction(), out[i:i+sz], a[i:i+sz], b[i:i+sz])
			continue
		}
		v := refFloat(dt, op.Reduction(), decodeFloat(dt, a[i:i+sz]), decodeFloat(dt, b[i:i+sz]))
		encodeFloat(dt, out[i:i+sz], v)
	}
	return out
}

// randomElems fills n elements of dt with a mix of random bit patterns,
// small exactly-representable values and special values.
func randomElems(r *rand.Rand, dt DType, n int) []byte {
	sz := dt.Size()
	buf := make([]byte, n*sz)
	for i := 0; i < len(buf); i += sz {
		e := buf[i : i+sz]
		var raw [8]byte
		binary.LittleEndian.PutUint64(raw[:], r.Uint64())
		copy(e, raw[:])
		if !dt.IsFloat() {
			if r.IntN(2) == 0 { // small values make min/max/sum ties and signs likely
				v := uint64(r.IntN(7) - 3)
				binary.LittleEndian.PutUint64(raw[:], v)
				copy(e, raw[:])
			}
			continue
		}
		switch r.IntN(4) {
		case 0: // small dyadic: exact sums and products in wider types
			encodeFloat(dt, e, float64(r.IntN(512)-256)/4)
		case 1:
			specials := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN()}
			encodeFloat(dt, e, specials[r.IntN(len(specials))])
		}
	}
	return buf
}
