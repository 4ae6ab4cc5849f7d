package hvd

import (
	"context"
	"fmt"
)

// Param is one named trainable parameter of a model: its values and the
// gradient of the loss with respect to them, both float64 (the examples'
// matrix math is float64 BLAS). Names must be unique within a model and
// the same on every rank; they name the parameter's tensors on the wire
// ("param/<name>", "grad/<name>").
type Param struct {
	Name  string
	Value []float64
	Grad  []float64
}

// NewParam returns a parameter of n zero values with a zero gradient.
func NewParam(name string, n int) *Param {
	return &Param{Name: name, Value: make([]float64, n), Grad: make([]float64, n)}
}

// checkParams reports the first parameter that is nil, unnamed, named
// twice, or whose gradient and values differ in length.
func checkParams(params []*Param) error {
	seen := make(map[string]bool, len(params))
	for i, p := range params {
		switch {
		case p == nil:
			return fmt.Errorf("%w: parameter %d is nil", ErrInvalidParam, i)
		case p.Name == "":
			return fmt.Errorf("%w: parameter %d has no name", ErrInvalidParam, i)
		case seen[p.Name]:
			return fmt.Errorf("%w: two parameters are named %q", ErrInvalidParam, p.Name)
		case len(p.Grad) != len(p.Value):
			return fmt.Errorf("%w: %q has %d values and %d gradients", ErrInvalidParam, p.Name, len(p.Value), len(p.Grad))
		}
		seen[p.Name] = true
	}
	return nil
}

// BroadcastParameters copies root's parameter values into every rank's
// parameters, so that all ranks start training from the same point. Every
// rank must pass parameters of the same names and lengths. The broadcasts
// of all parameters are in flight together.
func BroadcastParameters(ctx context.Context, rt *Runtime, params []*Param, root int) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	if err := checkParams(params); err != nil {
		return err
	}
	bufs := make([][]float64, len(params))
	names := make([]string, len(params))
	for i, p := range params {
		bufs[i], names[i] = p.Value, "param/"+p.Name
	}
	return broadcastAll(ctx, rt, names, bufs, root)
}
