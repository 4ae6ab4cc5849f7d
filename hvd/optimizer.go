package hvd

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Optimizer updates named parameters from their gradients. SGD and Adam
// implement it, and so does the DistributedOptimizer that wraps either.
type Optimizer interface {
	// Params are the parameters the optimizer updates, in a fixed order.
	Params() []*Param
	// Step applies one update from the parameters' gradients.
	Step(ctx context.Context) error
	// ZeroGrad sets every parameter's gradient to zero.
	ZeroGrad()
	// LR is the current learning rate.
	LR() float64
	// SetLR changes the learning rate (for warm-up and schedules).
	SetLR(lr float64)
	// State is a deep copy of the optimizer's state: its step count,
	// learning rate and per-parameter buffers (momentum, moments).
	State() OptimizerState
	// SetState replaces the state with a copy of s, which must have the
	// slots this optimizer has, of the same lengths.
	SetState(s OptimizerState) error
}

// OptimizerState is an optimizer's state, for checkpoints and for
// broadcasting rank 0's state to the other ranks. It is gob-encodable.
type OptimizerState struct {
	// Steps counts the updates applied so far.
	Steps int64
	// LR is the learning rate.
	LR float64
	// Slots holds the per-parameter buffers by name, such as
	// "momentum/<param>" or "adam.m/<param>".
	Slots map[string][]float64
}

// slots is the set of named state buffers of an optimizer; every buffer
// exists from the optimizer's construction on, so that all ranks have the
// same slots before their first step.
type slots map[string][]float64

// snapshot returns a deep copy of the slots.
func (s slots) snapshot() map[string][]float64 {
	out := make(map[string][]float64, len(s))
	for k, v := range s {
		out[k] = slices.Clone(v)
	}
	return out
}

// load copies in, which must have exactly the same names and lengths.
func (s slots) load(in map[string][]float64) error {
	for k, v := range s {
		w, ok := in[k]
		if !ok {
			return fmt.Errorf("%w: slot %q is missing", ErrOptimizerState, k)
		}
		if len(w) != len(v) {
			return fmt.Errorf("%w: slot %q has %d values, want %d", ErrOptimizerState, k, len(w), len(v))
		}
	}
	for k := range in {
		if _, ok := s[k]; !ok {
			return fmt.Errorf("%w: unknown slot %q", ErrOptimizerState, k)
		}
	}
	for k, v := range s {
		copy(v, in[k])
	}
	return nil
}

// names returns the slot names in sorted order.
func (s slots) names() []string { return slices.Sorted(maps.Keys(s)) }

// BroadcastOptimizerState copies root's optimizer state (step count,
// learning rate, every slot) into every rank's optimizer on rt (nil: the
// default runtime). Call it after BroadcastParameters when resuming from
// state that only root holds. With a DistributedOptimizer that shards its
// state (DistributedOptions.ShardState) it broadcasts the gathered whole
// state, and each rank keeps its part.
func BroadcastOptimizerState(ctx context.Context, rt *Runtime, opt Optimizer, root int) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	if opt == nil {
		return fmt.Errorf("%w: BroadcastOptimizerState needs an optimizer, got nil", ErrOptimizerState)
	}
	st, err := broadcastState(ctx, rt, opt.State(), root)
	if err != nil {
		return err
	}
	return opt.SetState(st)
}

// broadcastState overwrites st (its slot buffers included) with root's
// and returns it. Every rank's st must have the same slot names and
// lengths.
func broadcastState(ctx context.Context, rt *Runtime, st OptimizerState, root int) (OptimizerState, error) {
	names := slices.Sorted(maps.Keys(st.Slots))
	scalars := []float64{float64(st.Steps), st.LR}
	ts := make([]*Tensor, 0, len(names)+1)
	ts = append(ts, NewTensor("optimizer.scalars", scalars))
	for _, n := range names {
		ts = append(ts, NewTensor("optimizer/"+n, st.Slots[n]))
	}
	if err := broadcastAll(ctx, rt, ts, root); err != nil {
		return st, err
	}
	st.Steps, st.LR = int64(scalars[0]), scalars[1]
	return st, nil
}
