//go:build !cgo

package main

const blasName = "pure Go: built without cgo"

// dgemm sets c = a·b for n×n matrices.
func dgemm(n int, a, b, c []float64) {
	clear(c)
	for i := range n {
		for p := range n {
			s := a[i*n+p]
			for j := range n {
				c[i*n+j] += s * b[p*n+j]
			}
		}
	}
}

func setThreads(int) {}
