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
