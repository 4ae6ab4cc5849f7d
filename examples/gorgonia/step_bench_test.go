package main

import (
	"math/rand/v2"
	"testing"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkStep times one training step of the CNN (forward, backward,
// Adam) on a batch of 64: Gorgonia's own step, and the same step through
// hvdgorgonia's DistributedSolver on a one-rank job. The difference is the
// adapter's overhead at np 1.
func BenchmarkStep(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		name := "gorgonia"
		if wrapped {
			name = "hvdgorgonia-np1"
		}
		b.Run(name, func(b *testing.B) {
			cfg := ciConfig()
			trainSet, _ := synthetic(64, 1, 1)
			g := G.NewGraph()
			weights := newWeights(g, cfg.Arch, rand.New(rand.NewPCG(1, 0)))
			n, err := build(g, weights, 64)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := G.Grad(n.loss, weights...); err != nil {
				b.Fatal(err)
			}
			vm := G.NewTapeMachine(g, G.BindDualValues(weights...))
			defer vm.Close()
			var solver G.Solver = G.NewAdamSolver(G.WithLearnRate(1e-4))
			if wrapped {
				rt := hvdtest.Start(b, 1)[0]
				if solver, err = hvdgorgonia.NewDistributedSolver(solver, rt, hvdgorgonia.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			x := tensor.New(tensor.WithShape(64, 1, side, side), tensor.Of(tensor.Float32))
			y := tensor.New(tensor.WithShape(64, classes), tensor.Of(tensor.Float32))
			idx := make([]int, 64)
			for i := range idx {
				idx[i] = i
			}
			fill(trainSet, idx, x, y)
			G.Let(n.x, x)
			G.Let(n.y, y)
			model := G.NodesToValueGrads(weights)
			for b.Loop() {
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				if err := solver.Step(model); err != nil {
					b.Fatal(err)
				}
				vm.Reset()
			}
		})
	}
}
