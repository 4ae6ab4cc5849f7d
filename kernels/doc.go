// Package kernels holds gorovod's element types, reduction operators and the
// CPU loops that apply them to raw byte buffers. It knows nothing about ranks
// or sockets: the collective layer hands it two equally long buffers and asks
// for dst[i] = op(dst[i], src[i]), or for every element to be scaled.
//
// # Element types
//
// F32, F64, F16 (IEEE binary16), BF16 (bfloat16), I32, I64 and U8. Buffers
// are []byte in the machine's byte order, a whole number of elements long
// and aligned to the element size (buffers from make, or AsBytes of a typed
// slice, are); Reduce and Scale check this and return errors wrapping
// ErrLength or ErrAlign. FromBytes and AsBytes convert between byte and typed
// views without copying.
//
// # Operators
//
// Sum, Min, Max and Prod are applied element-wise. Average reduces exactly as
// Sum; the caller divides afterwards with Scale(dt, buf, 1/n), usually folded
// into the post-scale factor, so one pass over memory does both.
//
// # Floating point
//
// Arithmetic follows IEEE 754 with round-to-nearest-even in the type's own
// precision. Min and Max propagate NaN: if either operand is a NaN the result
// is a NaN (unlike a comparison-based select, which would depend on operand
// order), and -0 counts as smaller than +0 (IEEE 754-2019 minimum/maximum, as
// Go's built-in min and max). Float32 and float64 sums use gonum's AXPY
// (SSE assembly on amd64; SumKernels says which this build has), which
// gives the same bits as a plain loop. Float32 and float64 Scale (Average,
// and the pre- and post-scale factors) runs gorovod's own SSE assembly on
// amd64 (ScaleKernels), also the same bits as a plain loop, at 2-6 times
// its speed (BenchmarkScaleImpl).
//
// Float16 and BFloat16 are stored as bit patterns. Reductions widen both
// operands to float32, combine them in float32 and narrow the result with
// round-to-nearest-even; float32 has more than twice the precision of either
// format plus two bits, so sums and products are correctly rounded as if done
// exactly. Narrowing overflows to ±Inf (float16: from 65520 up), underflows
// gradually through the subnormals, and turns NaNs into quiet NaNs. The same
// conversions are exported for gradient compression: ToFloat16, ToBFloat16,
// the Float32 methods and the bulk F32ToF16, F16ToF32, F32ToBF16 and
// BF16ToF32. F16ToF32 decodes through a 64 Ki-entry table (256 KiB), built
// on first use.
//
// # Integers
//
// Integer Sum and Prod wrap on overflow (two's complement, modulo 2^bits),
// as Go's own arithmetic does. Scale on integers rounds x·factor to the
// nearest integer, ties to even, and saturates to the type's range, so the
// integer Average of 3 and 4 is round(3.5) = 4 and of 1 and 2 is round(1.5)
// = 2 (Horovod truncates toward zero: 3 and 1); the product is formed in
// float64, which is exact for |x| ≤ 2^53.
package kernels
