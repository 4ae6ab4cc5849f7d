package main

import "github.com/gorovod/gorovod/kernels"

// fillConst sets every element of buf (of type dt) to v.
func fillConst(dt kernels.DType, buf []byte, v float64) {
	switch dt {
	case kernels.F32:
		setAll(kernels.FromBytes[float32](buf), float32(v))
	case kernels.F64:
		setAll(kernels.FromBytes[float64](buf), v)
	case kernels.F16:
		setAll(kernels.FromBytes[kernels.Float16](buf), kernels.ToFloat16(float32(v)))
	case kernels.BF16:
		setAll(kernels.FromBytes[kernels.BFloat16](buf), kernels.ToBFloat16(float32(v)))
	case kernels.I32:
		setAll(kernels.FromBytes[int32](buf), int32(v))
	case kernels.I64:
		setAll(kernels.FromBytes[int64](buf), int64(v))
	case kernels.U8:
		setAll(buf, uint8(v))
	}
}

func setAll[T kernels.Element](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// countWrong counts the elements of buf that are not exactly want.
func countWrong(dt kernels.DType, buf []byte, want float64) int {
	bad := 0
	check := func(ok bool) {
		if !ok {
			bad++
		}
	}
	switch dt {
	case kernels.F32:
		for _, x := range kernels.FromBytes[float32](buf) {
			check(float64(x) == want)
		}
	case kernels.F64:
		for _, x := range kernels.FromBytes[float64](buf) {
			check(x == want)
		}
	case kernels.F16:
		for _, x := range kernels.FromBytes[kernels.Float16](buf) {
			check(x == kernels.ToFloat16(float32(want)))
		}
	case kernels.BF16:
		for _, x := range kernels.FromBytes[kernels.BFloat16](buf) {
			check(x == kernels.ToBFloat16(float32(want)))
		}
	case kernels.I32:
		for _, x := range kernels.FromBytes[int32](buf) {
			check(int64(x) == int64(want))
		}
	case kernels.I64:
		for _, x := range kernels.FromBytes[int64](buf) {
			check(x == int64(want))
		}
	case kernels.U8:
		for _, x := range buf {
			check(x == uint8(want))
		}
	}
	return bad
}
