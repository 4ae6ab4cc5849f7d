// Package hvdgorgonia trains Gorgonia (gorgonia.org/gorgonia) models
// data-parallel with gorovod: one process per rank under gorun, each
// running the same graph on its shard of the data.
//
// Wrap the solver and broadcast the initial values:
//
//	hvd.Init(ctx)
//	rt := hvd.Default()
//	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(learnables...))
//	hvdgorgonia.BroadcastLearnables(ctx, rt, learnables, 0)
//	solver, _ := hvdgorgonia.NewDistributedSolver(gorgonia.NewAdamSolver(gorgonia.WithLearnRate(1e-3)), rt, hvdgorgonia.Options{})
//	for each batch of this rank's shard {
//		gorgonia.Let(x, batch)
//		vm.RunAll()
//		solver.Step(gorgonia.NodesToValueGrads(learnables))
//		vm.Reset()
//	}
//
// DistributedSolver.Step all-reduces (averages) every learnable's gradient
// in place, every gradient's all-reduce in flight together, in the
// gradient's own []float32 or []float64 memory (no copy), then steps the
// wrapped solver, then zeros every gradient: Gorgonia's tape machine adds
// each run's gradient to the last one, and only a zeroed gradient keeps
// the steps apart.
//
// Gorgonia's tape machine runs the whole backward pass in one RunAll, so
// the all-reduces start when it has returned; they cannot overlap the
// backward pass.
//
// # Solver state
//
// Gorgonia's stateful solvers keep their state in unexported fields that
// have no accessor: Momentum, RMSPropSolver and AdaGradSolver in cache,
// AdamSolver in cache and iter, BarzilaiBorweinSolver in prevDV, AdamW in
// iter and states (a map keyed by the learnables' *Node, which differ from
// rank to rank). This package cannot read or write them, so it cannot
// broadcast a solver's state. It does not need to at the start of a job: a
// solver holds no state before its first Step, and ranks that start from
// the same values (BroadcastLearnables) and step with the same averaged
// gradients keep the same state. A rank that joins a job part way through
// (elastic training) starts with a fresh solver state; VanillaSolver has
// none to lose.
//
// # Module
//
// This package is its own Go module, so that gorovod's core module does
// not depend on Gorgonia. It requires go4.org/unsafe/assume-no-moving-gc at
// its latest version: the version gorgonia.org/tensor v0.9.24 asks for
// panics at start on Go 1.26.
package hvdgorgonia
