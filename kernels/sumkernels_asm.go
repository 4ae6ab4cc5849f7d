//go:build amd64 && !noasm && !gccgo && !safe

package kernels

// SumKernels says how this build adds float32 and float64 buffers (Sum and
// Average): with gonum's AXPY, whose SSE assembly gonum compiles in on
// amd64 unless built with the tag noasm, safe or gccgo (the same
// constraints as gonum's internal/asm/f32 and f64).
const SumKernels = "SSE assembly (gonum, amd64)"
