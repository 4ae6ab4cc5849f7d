// Package compress has gradient compressors for hvd.DistributedOptimizer:
// PowerSGD (low-rank, Vogels et al. 2019) and top-k sparsification, both
// with error feedback. Each is an hvd.GradientHook: set it as
// DistributedOptions.Hook.
//
//	opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{
//		Hook: &compress.PowerSGD{Rank: 4},
//	})
//
// Error feedback keeps, per gradient and rank, what the compressed form
// left out and adds it to the next step's gradient, so that nothing is
// lost, only delayed. The residuals (and PowerSGD's warm-start factors)
// are the gradient's hook state: they start at zero when the optimizer is
// bound to a job, and again at every new formation of an elastic job (see
// hvd.HookGradient).
package compress
