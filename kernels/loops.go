package kernels

import "gonum.org/v1/gonum/blas/gonum"

// The element loops. Each re-slices src to len(dst) first so that the
// compiler drops the bounds checks inside the loop.

// sumF32 adds float32 buffers with the AXPY of gonum's pure-Go BLAS, which
// has an SSE kernel on amd64 (y += 1·x, bit-for-bit y + x): about twice a Go
// loop, which the gc compiler does not vectorise (see BenchmarkSumImpl).
// gonum.Implementation is called directly rather than through blas32, whose
// implementation is a replaceable package variable (blas32.Use).
func sumF32(dst, src []byte) {
	d, s := FromBytes[float32](dst), FromBytes[float32](src)
	gonum.Implementation{}.Saxpy(len(d), 1, s, 1, d, 1)
}

// sumF64 is sumF32 for float64.
func sumF64(dst, src []byte) {
	d, s := FromBytes[float64](dst), FromBytes[float64](src)
	gonum.Implementation{}.Daxpy(len(d), 1, s, 1, d, 1)
}

// sumLoop is the plain element-wise sum; integer overflow wraps.
func sumLoop[T int32 | int64 | uint8 | float32 | float64](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// prodLoop is the element-wise product; integer overflow wraps.
func prodLoop[T int32 | int64 | uint8 | float32 | float64](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] *= src[i]
	}
}

// minLoop uses the built-in min. For floats a NaN in either operand gives
// NaN and -0 is smaller than +0 (IEEE 754-2019 minimum).
func minLoop[T int32 | int64 | uint8 | float32 | float64](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = min(dst[i], src[i])
	}
}

// maxLoop is minLoop's counterpart (IEEE 754-2019 maximum for floats).
func maxLoop[T int32 | int64 | uint8 | float32 | float64](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = max(dst[i], src[i])
	}
}
