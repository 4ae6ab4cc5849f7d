//go:build cgo

package main

import "github.com/cpmech/gosl/la/oblas"

const blasName = "OpenBLAS via gosl la/oblas"

// dgemm sets c = a·b for n×n row-major matrices. OpenBLAS is
// column-major, where they read as their transposes: it computes
// cᵀ = bᵀ·aᵀ.
func dgemm(n int, a, b, c []float64) {
	oblas.Dgemm(false, false, n, n, n, 1, b, n, a, n, 0, c, n)
}

func setThreads(n int) { oblas.SetNumThreads(n) }
