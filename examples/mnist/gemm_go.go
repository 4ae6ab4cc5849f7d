//go:build !cgo

package main

// blasName says which matrix multiply this build uses.
const blasName = "pure Go (built without cgo: no OpenBLAS)"

// gemm computes c = alpha·op(a)·op(b) + beta·c for row-major matrices,
// like the OpenBLAS version, in plain Go (slow; for CGO_ENABLED=0 builds).
func gemm(ta, tb bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) {
	at := func(i, p int) float64 {
		if ta {
			return a[p*m+i]
		}
		return a[i*k+p]
	}
	for i := range m {
		row := c[i*n : (i+1)*n]
		scale(row, beta)
		for p := range k {
			s := alpha * at(i, p)
			if s == 0 {
				continue
			}
			for j := range row {
				if tb {
					row[j] += s * b[j*k+p]
				} else {
					row[j] += s * b[p*n+j]
				}
			}
		}
	}
}

func setThreads(int) {}
