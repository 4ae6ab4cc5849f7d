//go:build cgo

package main

import "github.com/cpmech/gosl/la/oblas"

// blasName says which matrix multiply this build uses.
const blasName = "OpenBLAS (gosl la/oblas Dgemm)"

// gemm computes c = alpha·op(a)·op(b) + beta·c for row-major matrices:
// op(a) is m×k, op(b) k×n, c m×n (a stored k×m when ta, b n×k when tb).
// OpenBLAS is column-major, where a row-major matrix reads as its
// transpose: so it computes cᵀ = op(b)ᵀ·op(a)ᵀ.
func gemm(ta, tb bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scale(c[:m*n], beta)
		return
	}
	lda, ldb := k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	oblas.Dgemm(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, n)
}

// setThreads sets the number of OpenBLAS threads.
func setThreads(n int) { oblas.SetNumThreads(n) }
