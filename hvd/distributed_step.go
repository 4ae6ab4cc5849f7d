package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// GradReady tells the optimizer that the named parameters' gradients of
// the current backward pass are final in their Grad (Grad32). On the last
// pass of a step it starts their all-reduce at once (on earlier passes it
// adds them to the step's local sum). The gradient may be overwritten as
// soon as GradReady returns: the optimizer works on its own copy.
// GradReady is safe for concurrent use; ranks may report in different
// orders.
func (o *DistributedOptimizer) GradReady(names ...string) error {
	for _, name := range names {
		if err := o.report(name); err != nil {
			return err
		}
	}
	return nil
}

func (o *DistributedOptimizer) report(name string) error {
	g, last, err := o.claim(name)
	if err != nil {
		return err
	}
	k := o.opts.BackwardPassesPerStep
	if o.zero != nil {
		o.zero.report(g, last, k)
		return nil
	}
	if k == 1 && g.alone {
		return nil // the mean over one rank is the gradient itself
	}
	if g.inPlace {
		return o.start(g, g.p.gradTensor("grad/"+g.p.Name), ReduceOptions{Prescale: g.pre})
	}
	switch {
	case k == 1 && g.p.Is32():
		encode(g.wire.Data, g.wire.DType, g.p.Grad32, g.pre)
	case k == 1:
		encode(g.wire.Data, g.wire.DType, g.p.Grad, g.pre)
	default:
		if g.acc == nil {
			g.acc = make([]float64, g.p.Len())
		}
		if g.p.Is32() {
			accumulate(g.acc, g.p.Grad32)
		} else {
			accumulate(g.acc, g.p.Grad)
		}
		if !last {
			return nil
		}
		encode(g.wire.Data, g.wire.DType, g.acc, g.pre/float64(k))
		clear(g.acc)
	}
	if g.hook != nil {
		o.startHook(g)
		return nil
	}
	return o.start(g, g.wire, ReduceOptions{})
}

// startHook hands g's gradient, scaled in its wire buffer, to the Hook in
// a goroutine of its own; collect waits for it.
func (o *DistributedOptimizer) startHook(g *gradSync) {
	decode(g.hook.Values, g.wire.Data, g.wire.DType, 1)
	done := make(chan struct{})
	g.hookDone, g.hookErr = done, nil
	o.mu.Lock()
	o.pending = append(o.pending, g)
	ctx := o.hookCtx
	o.mu.Unlock()
	go func() {
		defer close(done)
		g.hookErr = o.opts.Hook.ReduceGradient(ctx, g.hook)
	}()
}

// newHookContext gives the hook goroutines a new context, ending the
// last one's.
func (o *DistributedOptimizer) newHookContext() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hookCancel != nil {
		o.hookCancel()
	}
	o.hookCtx, o.hookCancel = context.WithCancel(context.Background())
}

// start begins the all-reduce of t, g's gradient or its wire copy.
func (o *DistributedOptimizer) start(g *gradSync, t *Tensor, ro ReduceOptions) error {
	op := kernels.Sum // the wire carries the average's scaling, if any
	if o.opts.Op == kernels.Adasum {
		op = kernels.Adasum
	}
	g.h = o.rt.AllreduceAsync(t, op, ro)
	o.mu.Lock()
	o.pending = append(o.pending, g)
	o.mu.Unlock()
	return nil
}

// claim marks name as reported in this pass and says whether the pass is
// the step's last.
func (o *DistributedOptimizer) claim(name string) (*gradSync, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.index[name]
	switch {
	case g == nil:
		return nil, false, fmt.Errorf("%w: no parameter is named %q", ErrGradReady, name)
	case g.reported:
		return nil, false, fmt.Errorf("%w: gradient of %q reported twice in one backward pass (call Step after each pass)", ErrGradReady, name)
	case o.synced:
		return nil, false, fmt.Errorf("%w: gradient of %q reported after Synchronize and before Step", ErrGradReady, name)
	}
	g.reported = true
	return g, o.pass == o.opts.BackwardPassesPerStep-1, nil
}

// Step ends a backward pass. On the last pass of a step (every pass, unless
// BackwardPassesPerStep > 1) it all-reduces the gradients not yet reported,
// waits for every all-reduce, writes the averaged gradients into the
// parameters' Grad (Grad32) and runs the wrapped optimizer's Step. On other
// passes it only keeps the gradients for later. Call Step only after every
// GradReady call of the pass has returned.
func (o *DistributedOptimizer) Step(ctx context.Context) error {
	if !o.isSynced() {
		done, err := o.endPass(ctx)
		if err != nil || !done {
			return err
		}
	}
	o.mu.Lock()
	o.synced = false
	o.mu.Unlock()
	return o.update(ctx)
}

// Synchronize finishes the last backward pass of a step without updating:
// the averaged gradients are in the parameters' Grad (Grad32) afterwards,
// to be read or clipped before Step, which then does not synchronize
// again.
func (o *DistributedOptimizer) Synchronize(ctx context.Context) error {
	o.mu.Lock()
	last := o.pass == o.opts.BackwardPassesPerStep-1
	o.mu.Unlock()
	if !last {
		return fmt.Errorf("%w: Synchronize before the last of %d backward passes", ErrGradReady, o.opts.BackwardPassesPerStep)
	}
	if _, err := o.endPass(ctx); err != nil {
		return err
	}
	o.mu.Lock()
	o.synced = true
	o.mu.Unlock()
	return nil
}

func (o *DistributedOptimizer) isSynced() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.synced
}

// endPass reports the gradients not reported in this pass, in parameter
// order, and closes the pass. After the step's last pass it waits for the
// all-reduces and returns true.
func (o *DistributedOptimizer) endPass(ctx context.Context) (bool, error) {
	for _, g := range o.grads {
		if !o.isReported(g) {
			if err := o.report(g.p.Name); err != nil {
				return false, err
			}
		}
	}
	o.mu.Lock()
	for _, g := range o.grads {
		g.reported = false
	}
	o.pass++
	done := o.pass == o.opts.BackwardPassesPerStep
	if done {
		o.pass = 0
	}
	o.mu.Unlock()
	if !done {
		return false, nil
	}
	return true, o.collect(ctx)
}

func (o *DistributedOptimizer) isReported(g *gradSync) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return g.reported
}

// collect waits for every all-reduce of the step, in the order they were
// started (which is about the order they finish), and decompresses each
// result into its parameter's gradient while the later ones are still running.
func (o *DistributedOptimizer) collect(ctx context.Context) error {
	if o.zero != nil {
		return o.zero.reduce(ctx)
	}
	o.mu.Lock()
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	var first error
	for i, g := range pending {
		if g.hook != nil {
			if err := o.waitHook(ctx, g, pending[i+1:]); err != nil && first == nil {
				first = err
			}
			continue
		}
		err := g.h.Wait(ctx)
		g.h = nil
		switch {
		case err == nil && g.inPlace: // the sum is in Grad already
		case err == nil && g.p.Is32():
			decode(g.p.Grad32, g.wire.Data, g.wire.DType, g.post)
		case err == nil:
			decode(g.p.Grad, g.wire.Data, g.wire.DType, g.post)
		case first == nil:
			first = err
		}
	}
	return first
}

// waitHook waits for g's hook exchange and writes its result into the
// gradient. When ctx ends first, it ends the hooks' context, waits for g
// and the later hooks (their exchanges stop at their next wait) and
// gives the optimizer a new context for them.
func (o *DistributedOptimizer) waitHook(ctx context.Context, g *gradSync, later []*gradSync) error {
	select {
	case <-g.hookDone:
	case <-ctx.Done():
		o.mu.Lock()
		o.hookCancel()
		o.mu.Unlock()
		for _, l := range append([]*gradSync{g}, later...) {
			if l.hook != nil {
				<-l.hookDone
			}
		}
		o.newHookContext()
		return fmt.Errorf("hvd: waiting for the hook's exchange of %q: %w", g.p.Name, ctx.Err())
	}
	if g.hookErr != nil {
		return fmt.Errorf("hvd: hook's exchange of %q: %w", g.p.Name, g.hookErr)
	}
	if g.p.Is32() {
		scaleInto(g.p.Grad32, g.hook.Values, g.post)
	} else {
		scaleInto(g.p.Grad, g.hook.Values, g.post)
	}
	return nil
}

// accumulate adds grad to acc.
func accumulate[T float](acc []float64, grad []T) {
	for i, v := range grad {
		acc[i] += float64(v)
	}
}
