// Package hvdgomlx trains GoMLX models (github.com/gomlx/gomlx) data-parallel
// with gorovod: GoMLX's own train.Trainer, train.Loop and optimizers, one
// process per rank under gorun, gradients averaged across the ranks before
// every update, variables broadcast from rank 0 before the first step.
//
// Wrap the optimizer and attach the wrapper to the loop:
//
//	opt, err := hvdgomlx.New(hvd.Default(), backend, optimizers.Adam().Done())
//	trainer := train.NewTrainer(backend, ctx, modelFn, lossFn, opt, trainMetrics, evalMetrics)
//	loop := train.NewLoop(trainer)
//	opt.Attach(loop)
//	_, err = loop.RunSteps(ds, steps) // ds yields this rank's shard
//
// Without a Loop, call opt.Step after every trainer.TrainStep.
//
// # How a step runs
//
// GoMLX runs a whole graph inside its backend, with no operation that calls
// back into Go midway, and the pure-Go backend (simplego) implements no
// collective operation; so the all-reduce runs on the host between two
// graphs. The Trainer's train graph computes this rank's gradients and,
// through the Optimizer's UpdateGraph, stores them in variables under
// GradientsScope instead of updating the model; Optimizer.Step copies them
// into one buffer per dtype, averages it across the ranks with one
// hvd all-reduce, copies it back, and runs a second, small graph in which
// the wrapped optimizer applies them (UpdateGraphWithGradients, the path
// GoMLX's own gradient accumulation uses). This works on every GoMLX
// backend; it costs one more graph execution and two copies of the
// gradients per step.
//
// # Convolutions and pooling on the pure-Go backend
//
// GoMLX v0.26.0's simplego runs layers.Convolution and graph.MaxPool
// forward but cannot differentiate them; Trainable(backend) adds the
// operations their gradients need, composed from ones every backend has,
// and computes convolutions as matrix products, which simplego runs
// faster than its own convolution.
//
// This package lives in its own module, so that gorovod's module does not
// depend on GoMLX.
package hvdgomlx
