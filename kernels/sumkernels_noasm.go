//go:build !amd64 || noasm || gccgo || safe

package kernels

// SumKernels says how this build adds float32 and float64 buffers (Sum and
// Average): with gonum's AXPY in pure Go, which gonum uses off amd64 and
// under the tags noasm, safe and gccgo (the same constraints as gonum's
// internal/asm/f32 and f64). The results are the same bits as with its
// assembly.
const SumKernels = "pure Go (gonum without assembly: not amd64, or built with noasm, safe or gccgo)"
