package hvd

// The rest of the Optimizer interface goes to the wrapped optimizer.

// Params are the wrapped optimizer's parameters.
func (o *DistributedOptimizer) Params() []*Param { return o.inner.Params() }

// ZeroGrad zeroes every gradient. (The optimizer copies gradients when they
// are reported, so zeroing after GradReady does not disturb the step.)
func (o *DistributedOptimizer) ZeroGrad() { o.inner.ZeroGrad() }

// LR is the wrapped optimizer's learning rate.
func (o *DistributedOptimizer) LR() float64 { return o.updater().LR() }

// SetLR sets the wrapped optimizer's learning rate.
func (o *DistributedOptimizer) SetLR(lr float64) {
	o.inner.SetLR(lr)
	o.updater().SetLR(lr)
}

// State is the wrapped optimizer's state; with ShardState it is gathered
// from every rank (see GatherState), so every rank must call it.
func (o *DistributedOptimizer) State() OptimizerState {
	if o.zero != nil {
		return o.zero.state()
	}
	return o.inner.State()
}

// SetState sets the wrapped optimizer's state; with ShardState s is the
// whole state (as State returns it) and this rank keeps its part.
func (o *DistributedOptimizer) SetState(s OptimizerState) error {
	if o.zero != nil {
		return o.zero.setState(s)
	}
	return o.inner.SetState(s)
}

// Inner is the wrapped optimizer.
func (o *DistributedOptimizer) Inner() Optimizer { return o.inner }

// Options are the options in effect (with defaults filled in).
func (o *DistributedOptimizer) Options() DistributedOptions { return o.opts }
