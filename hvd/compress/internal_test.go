package compress

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestKthLargest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 64, 1000} {
		for trial := range 20 {
			v := make([]float64, n)
			for i := range v {
				if trial%2 == 0 {
					v[i] = float64(rng.IntN(5) - 2) // many ties
				} else {
					v[i] = rng.NormFloat64()
				}
			}
			mags := make([]float64, n)
			for i, x := range v {
				mags[i] = math.Abs(x)
			}
			slices.Sort(mags)
			for k := 1; k <= n; k += max(1, n/7) {
				if got, want := kthLargest(v, k, make([]float64, n)), mags[n-k]; got != want {
					t.Fatalf("n %d trial %d: %d-th largest magnitude is %v, want %v", n, trial, k, got, want)
				}
			}
		}
	}
}

// TestOrthonormalize: the columns come out orthonormal to rounding, even
// from nearly dependent ones, and a zero column stays zero.
func TestOrthonormalize(t *testing.T) {
	const rows, r = 9, 4
	rng := rand.New(rand.NewPCG(3, 4))
	p := make([]float64, rows*r)
	for i := range rows {
		x := rng.NormFloat64()
		p[i*r] = x
		p[i*r+1] = x + 1e-9*rng.NormFloat64() // nearly column 0
		p[i*r+2] = rng.NormFloat64()
		p[i*r+3] = 0
	}
	orthonormalize(p, rows, r)
	for c := range r {
		for d := range r {
			var dot float64
			for i := range rows {
				dot += p[i*r+c] * p[i*r+d]
			}
			want := 0.0
			if c == d && c != 3 {
				want = 1
			}
			if math.Abs(dot-want) > 1e-12 {
				t.Errorf("column %d · column %d = %v, want %v", c, d, dot, want)
			}
		}
	}
}

// TestLowRankKernels: mulRows, mulCols and mulOuter (with and without
// from, in place too) agree with the products written as plain triple
// loops, for r from 1 to 7 (4 has its own code) and shapes with 1 to 37
// rows and columns; the sums run in a different order, so within a few
// ε of the sum of the terms' magnitudes.
func TestLowRankKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fill := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	near := func(what string, got, want, mag []float64) {
		t.Helper()
		for i := range want {
			if d := math.Abs(got[i] - want[i]); d > 1e-14*(1+mag[i]) {
				t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	for r := 1; r <= 7; r++ {
		for _, shape := range [][2]int{{1, 1}, {1, 37}, {37, 1}, {5, 9}, {9, 5}, {16, 16}, {33, 20}} {
			rows, cols := shape[0], shape[1]
			m, x, y := fill(rows*cols), fill(cols*r), fill(rows*r)
			wantRows, magRows := make([]float64, rows*r), make([]float64, rows*r)
			wantCols, magCols := make([]float64, cols*r), make([]float64, cols*r)
			wantOuter, magOuter := make([]float64, rows*cols), make([]float64, rows*cols)
			for i := range rows {
				for j := range cols {
					for k := range r {
						wantRows[i*r+k] += m[i*cols+j] * x[j*r+k]
						magRows[i*r+k] += math.Abs(m[i*cols+j] * x[j*r+k])
						wantCols[j*r+k] += m[i*cols+j] * y[i*r+k]
						magCols[j*r+k] += math.Abs(m[i*cols+j] * y[i*r+k])
						wantOuter[i*cols+j] += y[i*r+k] * x[j*r+k]
						magOuter[i*cols+j] += math.Abs(y[i*r+k] * x[j*r+k])
					}
				}
			}
			got := fill(rows * r) // garbage the kernel must overwrite
			mulRows(got, m, x, rows, cols, r)
			near("M·X", got, wantRows, magRows)
			got = fill(cols * r)
			mulCols(got, m, y, rows, cols, r)
			near("Mᵀ·Y", got, wantCols, magCols)
			got = fill(rows * cols)
			mulOuter(got, nil, y, x, rows, cols, r)
			near("Y·Xᵀ", got, wantOuter, magOuter)
			from := slices.Clone(m)
			mulOuter(from, from, y, x, rows, cols, r) // in place
			for i := range wantOuter {
				wantOuter[i] = m[i] - wantOuter[i]
				magOuter[i] += math.Abs(m[i])
			}
			near("M − Y·Xᵀ", from, wantOuter, magOuter)
		}
	}
}
