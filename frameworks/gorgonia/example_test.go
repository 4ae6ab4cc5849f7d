package hvdgorgonia_test

import (
	"context"
	"fmt"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Two ranks fit w in loss = mean((x·w - y)²), each on its own half of the
// data, with Gorgonia's Adam wrapped in a DistributedSolver; rank 0's
// initial w is broadcast to rank 1, and both end with the same w. Under
// gorun, hvd.Init and hvd.Default give each process its runtime instead of
// hvdtest.Run.
func ExampleNewDistributedSolver() {
	ctx := context.Background()
	err := hvdtest.Run(2, func(rt *hvd.Runtime) error {
		g := G.NewGraph()
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 1), G.WithName("w"),
			G.WithValue(tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{float64(rt.Rank()), 1}))))
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
		y := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 1), G.WithName("y"))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(x, w)), y))))))
		if _, err := G.Grad(loss, w); err != nil {
			return err
		}
		vm := G.NewTapeMachine(g, G.BindDualValues(w))
		defer vm.Close()

		if err := hvdgorgonia.BroadcastLearnables(ctx, rt, G.Nodes{w}, 0); err != nil {
			return err
		}
		solver, err := hvdgorgonia.NewDistributedSolver(G.NewAdamSolver(G.WithLearnRate(0.1)), rt, hvdgorgonia.Options{})
		if err != nil {
			return err
		}
		// This rank's shard: y = 2·x₀ - x₁.
		r := float64(rt.Rank())
		G.Let(x, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, r, r, 1})))
		G.Let(y, tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{2 - r, 2*r - 1})))
		for range 300 {
			if err := vm.RunAll(); err != nil {
				return err
			}
			if err := solver.Step(G.NodesToValueGrads(G.Nodes{w})); err != nil {
				return err
			}
			vm.Reset()
		}
		v := w.Value().Data().([]float64)
		fmt.Printf("rank %d: w = [%.2f %.2f]\n", rt.Rank(), v[0], v[1])
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// rank 0: w = [2.00 -1.00]
	// rank 1: w = [2.00 -1.00]
}
