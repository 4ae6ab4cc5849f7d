package main

import "math/rand/v2"

// dataset is y = X·w + b + noise, generated from the seed, identical on
// every rank (each then trains on its own shard of it).
type dataset struct {
	X     [][]float64
	Y     []float64
	TrueW []float64
	TrueB float64
}

func makeData(n, dim int, noise float64, seed uint64) dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := dataset{TrueW: make([]float64, dim), TrueB: rng.NormFloat64()}
	for j := range d.TrueW {
		d.TrueW[j] = 2*rng.Float64() - 1
	}
	for range n {
		x := make([]float64, dim)
		y := d.TrueB + noise*rng.NormFloat64()
		for j := range x {
			x[j] = rng.NormFloat64()
			y += d.TrueW[j] * x[j]
		}
		d.X, d.Y = append(d.X, x), append(d.Y, y)
	}
	return d
}
