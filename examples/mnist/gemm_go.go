//go:build !cgo

package main

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// blasName says which matrix multiply this build uses.
const blasName = "gonum (built without cgo: no OpenBLAS)"

// gemm computes c = alpha·op(a)·op(b) + beta·c for row-major matrices,
// like the OpenBLAS version, with gonum's pure-Go Dgemm (for CGO_ENABLED=0
// builds): op(a) is m×k, op(b) k×n, c m×n (a stored k×m when ta, b n×k
// when tb).
func gemm(ta, tb bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scale(c[:m*n], beta)
		return
	}
	am := blas64.General{Rows: m, Cols: k, Stride: k, Data: a}
	tA := blas.NoTrans
	if ta {
		am, tA = blas64.General{Rows: k, Cols: m, Stride: m, Data: a}, blas.Trans
	}
	bm := blas64.General{Rows: k, Cols: n, Stride: n, Data: b}
	tB := blas.NoTrans
	if tb {
		bm, tB = blas64.General{Rows: n, Cols: k, Stride: k, Data: b}, blas.Trans
	}
	blas64.Gemm(tA, tB, alpha, am, bm, beta, blas64.General{Rows: m, Cols: n, Stride: n, Data: c})
}

func setThreads(int) {}
