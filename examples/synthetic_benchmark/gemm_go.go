//go:build !cgo

package main

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

const blasName = "gonum: built without cgo"

// dgemm sets c = a·b for n×n matrices, with gonum's pure-Go Dgemm.
func dgemm(n int, a, b, c []float64) {
	g := func(d []float64) blas64.General { return blas64.General{Rows: n, Cols: n, Stride: n, Data: d} }
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, g(a), g(b), 0, g(c))
}

func setThreads(int) {}
