//go:build amd64 && !noasm && !gccgo && !safe

package kernels

// ScaleKernels says how this build scales float32 and float64 buffers
// (Scale, and so Average and the pre- and post-scale factors): with
// gorovod's SSE assembly on amd64 unless built with the tag noasm, safe
// or gccgo (the tags of SumKernels).
const ScaleKernels = "SSE assembly (amd64)"

// scaleF32SSE multiplies every element of buf by factor (scale_amd64.s).
//
//go:noescape
func scaleF32SSE(buf []float32, factor float32)

// scaleF64SSE is scaleF32SSE for float64.
//
//go:noescape
func scaleF64SSE(buf []float64, factor float64)

// scaleF32 multiplies buf by factor; the same bits as scaleFloat.
func scaleF32(buf []float32, factor float32) { scaleF32SSE(buf, factor) }

// scaleF64 is scaleF32 for float64.
func scaleF64(buf []float64, factor float64) { scaleF64SSE(buf, factor) }
