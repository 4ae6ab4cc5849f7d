package hvdgorgonia_test

import (
	"fmt"
	"testing"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// nopSolver updates nothing, so that a benchmark times the adapter alone.
type nopSolver struct{}

func (nopSolver) Step([]G.ValueGrad) error { return nil }

// BenchmarkStepOverhead times what DistributedSolver.Step adds to the
// solver it wraps (a solver that does nothing) on float32 learnables of
// the sizes of examples/gorgonia's CNN (52 874 values in 6 tensors): at np
// 1 wrapping the gradients and zeroing them; at np 2 (in-process ranks,
// each benchmark op one step on both) the all-reduces too.
func BenchmarkStepOverhead(b *testing.B) {
	shapes := []tensor.Shape{{8, 1, 3, 3}, {16, 8, 3, 3}, {784, 64}, {1, 64}, {64, 10}, {1, 10}}
	for _, np := range []int{1, 2} {
		b.Run(fmt.Sprintf("np%d", np), func(b *testing.B) {
			rts := hvdtest.Start(b, np)
			models := make([][]G.ValueGrad, np)
			solvers := make([]*hvdgorgonia.DistributedSolver, np)
			for r := range np {
				g := G.NewGraph()
				var ws G.Nodes
				var loss *G.Node
				for i, s := range shapes {
					w := G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(fmt.Sprint("w", i)), G.WithInit(G.Ones()))
					ws = append(ws, w)
					l := G.Must(G.Sum(G.Must(G.Square(w))))
					if loss == nil {
						loss = l
					} else {
						loss = G.Must(G.Add(loss, l))
					}
				}
				if _, err := G.Grad(loss, ws...); err != nil {
					b.Fatal(err)
				}
				vm := G.NewTapeMachine(g, G.BindDualValues(ws...))
				if err := vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				vm.Close()
				models[r] = G.NodesToValueGrads(ws)
				var err error
				if solvers[r], err = hvdgorgonia.NewDistributedSolver(nopSolver{}, rts[r], hvdgorgonia.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if np == 1 {
					if err := solvers[0].Step(models[0]); err != nil {
						b.Fatal(err)
					}
					continue
				}
				hvdtest.Each(b, rts, func(rt *hvd.Runtime) error {
					return solvers[rt.Rank()].Step(models[rt.Rank()])
				})
			}
		})
	}
}
