package hvd

import (
	"fmt"
	"maps"
	"slices"
)

// Checkpoint is the state of a training run between two steps: enough to
// resume it without losing or repeating a step. It is gob-encoded inside a
// checksummed file (see WriteCheckpoint).
type Checkpoint struct {
	// Epoch is the epoch the next step belongs to.
	Epoch int
	// Step counts the optimizer steps completed since the start of the run.
	Step int64
	// Params are the parameter values by name (a float32 parameter's
	// widened to float64, which is exact).
	Params map[string][]float64
	// Optimizer is the optimizer's state.
	Optimizer OptimizerState
	// Seed is the run's random seed (data order, initialization).
	Seed uint64
	// RNG is the state of a random generator still in use, as its
	// MarshalBinary writes it (math/rand/v2's PCG does); may be nil.
	RNG []byte
	// Meta holds free-form notes (the model's shape, the flags).
	Meta map[string]string
}

// NewCheckpoint captures opt's parameters and state after step steps, at
// epoch. The values are copies.
func NewCheckpoint(opt Optimizer, epoch int, step int64) *Checkpoint {
	ps := opt.Params()
	c := &Checkpoint{Epoch: epoch, Step: step, Params: make(map[string][]float64, len(ps)), Optimizer: opt.State()}
	for _, p := range ps {
		c.Params[p.Name] = valuesF64(p)
	}
	return c
}

// Restore loads the checkpoint's parameter values and optimizer state into
// opt, whose parameters must have the same names and lengths.
func (c *Checkpoint) Restore(opt Optimizer) error {
	ps := opt.Params()
	for _, p := range ps {
		v, ok := c.Params[p.Name]
		if !ok {
			return fmt.Errorf("%w: checkpoint has no parameter %q", ErrBadCheckpoint, p.Name)
		}
		if len(v) != p.Len() {
			return fmt.Errorf("%w: checkpoint's %q has %d values, the model %d", ErrBadCheckpoint, p.Name, len(v), p.Len())
		}
	}
	if len(c.Params) != len(ps) {
		return fmt.Errorf("%w: checkpoint has %d parameters (%v), the model %d", ErrBadCheckpoint, len(c.Params), slices.Sorted(maps.Keys(c.Params)), len(ps))
	}
	if err := opt.SetState(c.Optimizer); err != nil {
		return fmt.Errorf("hvd: restoring a checkpoint: %w", err)
	}
	for _, p := range ps {
		v := c.Params[p.Name]
		if !p.Is32() {
			copy(p.Value, v)
			continue
		}
		for i, x := range v {
			p.Value32[i] = float32(x)
		}
	}
	return nil
}

// valuesF64 is a float64 copy of p's values.
func valuesF64(p *Param) []float64 {
	if !p.Is32() {
		return slices.Clone(p.Value)
	}
	out := make([]float64, len(p.Value32))
	for i, x := range p.Value32 {
		out[i] = float64(x)
	}
	return out
}
