//go:build !amd64 || noasm || gccgo || safe

package kernels

// ScaleKernels says how this build scales float32 and float64 buffers
// (Scale, and so Average and the pre- and post-scale factors): with a Go
// loop off amd64 and under the tags noasm, safe and gccgo (the tags of
// SumKernels). The results are the same bits as with the assembly.
const ScaleKernels = "Go loop (not amd64, or built with noasm, safe or gccgo)"

// scaleF32 multiplies buf by factor.
func scaleF32(buf []float32, factor float32) { scaleFloat(buf, factor) }

// scaleF64 is scaleF32 for float64.
func scaleF64(buf []float64, factor float64) { scaleFloat(buf, factor) }
