package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestScaleKernelsMatchLoop checks scaleF32 and scaleF64 (assembly on
// amd64) against the plain loop bit for bit: every length up to 70, so
// that each of the kernels' tails runs, from each of 4 starting elements
// (unaligned vectors), on values that include zeros of both signs,
// subnormals, infinities, NaNs and the largest finite values, by factors
// that overflow, underflow, round and are not finite; elements around the
// slice stay untouched.
func TestScaleKernelsMatchLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	special64 := []float64{0, math.Copysign(0, -1), 5e-324, -2.2e-308, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, -1, 1}
	special32 := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1.1e-38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -1, 1}
	factors := []float64{0.25, 1.0 / 3, -7.5, 3e38, 1e-30, 1e300, 0, math.Inf(1), math.NaN()}
	for _, factor := range factors {
		for off := range 4 {
			for n := range 71 {
				a32 := make([]float32, off+n+2)
				a64 := make([]float64, off+n+2)
				for i := range a32 {
					if rng.IntN(4) == 0 {
						a32[i], a64[i] = special32[rng.IntN(len(special32))], special64[rng.IntN(len(special64))]
					} else {
						a32[i], a64[i] = float32(rng.NormFloat64()*1e3), rng.NormFloat64()*1e3
					}
				}
				w32, w64 := append([]float32(nil), a32...), append([]float64(nil), a64...)
				scaleF32(a32[off:off+n], float32(factor))
				scaleFloat(w32[off:off+n], float32(factor))
				scaleF64(a64[off:off+n], factor)
				scaleFloat(w64[off:off+n], factor)
				for i := range a32 {
					if math.Float32bits(a32[i]) != math.Float32bits(w32[i]) {
						t.Fatalf("float32, factor %g, %d elements from %d: element %d is %x, the loop gives %x", factor, n, off, i, math.Float32bits(a32[i]), math.Float32bits(w32[i]))
					}
					if math.Float64bits(a64[i]) != math.Float64bits(w64[i]) {
						t.Fatalf("float64, factor %g, %d elements from %d: element %d is %x, the loop gives %x", factor, n, off, i, math.Float64bits(a64[i]), math.Float64bits(w64[i]))
					}
				}
			}
		}
	}
}

// BenchmarkScaleImpl justifies scaleF32 and scaleF64 (ScaleKernels)
// against the plain Go loop.
func BenchmarkScaleImpl(b *testing.B) {
	impls := []struct {
		name string
		dt   DType
		f    func([]byte)
	}{
		{"f32/kernel", F32, func(p []byte) { scaleF32(FromBytes[float32](p), 0.5) }},
		{"f32/loop", F32, func(p []byte) { scaleFloat(FromBytes[float32](p), 0.5) }},
		{"f64/kernel", F64, func(p []byte) { scaleF64(FromBytes[float64](p), 0.5) }},
		{"f64/loop", F64, func(p []byte) { scaleFloat(FromBytes[float64](p), 0.5) }},
	}
	for _, im := range impls {
		for _, s := range benchSizes {
			b.Run(im.name+"/"+s.name, func(b *testing.B) {
				buf := benchBuffer(im.dt, s.bytes, 1)
				b.SetBytes(int64(s.bytes))
				for b.Loop() {
					im.f(buf)
				}
			})
		}
	}
}
