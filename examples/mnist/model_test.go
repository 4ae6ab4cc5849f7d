package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGemmMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const m, n, k = 5, 4, 3
	a, b := make([]float64, m*k), make([]float64, k*n)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			c := make([]float64, m*n)
			for i := range c {
				c[i] = 1
			}
			gemm(ta, tb, m, n, k, 2, a, b, 0.5, c)
			for i := range m {
				for j := range n {
					want := 0.5
					for p := range k {
						ai, bj := a[i*k+p], b[p*n+j]
						if ta {
							ai = a[p*m+i]
						}
						if tb {
							bj = b[j*k+p]
						}
						want += 2 * ai * bj
					}
					if math.Abs(c[i*n+j]-want) > 1e-12 {
						t.Fatalf("ta=%v tb=%v: c[%d,%d] = %v, want %v", ta, tb, i, j, c[i*n+j], want)
					}
				}
			}
		}
	}
}

// TestBackpropMatchesFiniteDifferences checks every layer's gradients
// against central differences of the loss, on a few coordinates per
// parameter.
func TestBackpropMatchesFiniteDifferences(t *testing.T) {
	train, _ := synthetic(3, 0, 5)
	x := &mat{}
	labels := make([]uint8, 3)
	train.gather([]int{0, 1, 2}, x, labels)
	for _, kind := range []string{"mlp", "cnn"} {
		m, _ := newModel(kind, 16, 3)
		lossAt := func() float64 {
			l, _, _ := m.loss(m.forward(x), labels)
			return l
		}
		_, _, d := m.loss(m.forward(x), labels)
		var reported []string
		m.backward(d, func(names ...string) error { reported = append(reported, names...); return nil })
		if len(reported) != len(m.params()) {
			t.Errorf("%s: reported %v", kind, reported)
		}
		rng := rand.New(rand.NewPCG(2, 2))
		for _, p := range m.params() {
			for range 4 {
				i := rng.IntN(len(p.Value))
				v, h := p.Value[i], 1e-5
				p.Value[i] = v + h
				up := lossAt()
				p.Value[i] = v - h
				down := lossAt()
				p.Value[i] = v
				if num := (up - down) / (2 * h); math.Abs(num-p.Grad[i]) > 1e-6*max(1, math.Abs(num)) {
					t.Errorf("%s %s[%d]: backprop %v, finite differences %v", kind, p.Name, i, p.Grad[i], num)
				}
			}
		}
	}
}
