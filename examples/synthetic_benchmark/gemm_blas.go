//go:build cgo

package main

import "github.com/cpmech/gosl/la/oblas"

const blasName = "OpenBLAS via gosl la/oblas"

// dgemm sets c = a·b for n×n matrices.
func dgemm(n int, a, b, c []float64) {
	oblas.Dgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
}

func setThreads(n int) { oblas.SetNumThreads(n) }
