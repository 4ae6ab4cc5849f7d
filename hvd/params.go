package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// Param is one named trainable parameter of a model: its values and the
// gradient of the loss with respect to them, either float64 (Value and
// Grad; the examples' matrix math is float64 BLAS) or float32 (Value32 and
// Grad32, with Value and Grad nil; most models train in float32). A model
// may mix the two. Names must be unique within a model and the same on
// every rank; they name the parameter's tensors on the wire ("param/<name>",
// "grad/<name>").
//
// Optimizers compute each update in float64 and keep their state (momentum,
// moments) in float64 whatever the parameter's type; a float32 parameter
// stores the result rounded to float32.
type Param struct {
	Name  string
	Value []float64
	Grad  []float64
	// Value32 and Grad32 hold a float32 parameter instead of Value and
	// Grad.
	Value32 []float32
	Grad32  []float32
	// Shape optionally gives the parameter's dimensions (a dense layer's
	// in×out weights: {in, out}); their product must be the length. Nil
	// means a vector. Only gradient hooks read it (a GradientHook sees it
	// as HookGradient.Shape; PowerSGD reshapes a gradient to a matrix of
	// Shape[0] rows).
	Shape []int
}

// NewParam returns a float64 parameter of n zero values with a zero
// gradient.
func NewParam(name string, n int) *Param {
	return &Param{Name: name, Value: make([]float64, n), Grad: make([]float64, n)}
}

// NewParam32 returns a float32 parameter of n zero values with a zero
// gradient.
func NewParam32(name string, n int) *Param {
	return &Param{Name: name, Value32: make([]float32, n), Grad32: make([]float32, n)}
}

// Is32 reports whether p is a float32 parameter (Value32 or Grad32 is set).
func (p *Param) Is32() bool { return p.Value32 != nil || p.Grad32 != nil }

// Len is the number of values.
func (p *Param) Len() int {
	if p.Is32() {
		return len(p.Value32)
	}
	return len(p.Value)
}

// DType is the parameter's element type: kernels.F32 or kernels.F64.
func (p *Param) DType() kernels.DType {
	if p.Is32() {
		return kernels.F32
	}
	return kernels.F64
}

// values returns the values as a tensor named name, sharing p's memory.
func (p *Param) values(name string) *Tensor {
	if p.Is32() {
		return NewTensor(name, p.Value32)
	}
	return NewTensor(name, p.Value)
}

// gradTensor returns the gradient as a tensor named name, sharing p's
// memory.
func (p *Param) gradTensor(name string) *Tensor {
	if p.Is32() {
		return NewTensor(name, p.Grad32)
	}
	return NewTensor(name, p.Grad)
}

// zeroGrad sets the gradient to zero.
func (p *Param) zeroGrad() {
	clear(p.Grad)
	clear(p.Grad32)
}

// checkParams reports the first parameter that is nil, unnamed, named
// twice, has both float64 and float32 storage, or whose gradient and values
// differ in length.
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
		case p.Is32() && (p.Value != nil || p.Grad != nil):
			return fmt.Errorf("%w: %q has both float64 (Value, Grad) and float32 (Value32, Grad32) storage", ErrInvalidParam, p.Name)
		case p.Is32() && len(p.Grad32) != len(p.Value32):
			return fmt.Errorf("%w: %q has %d float32 values and %d gradients", ErrInvalidParam, p.Name, len(p.Value32), len(p.Grad32))
		case len(p.Grad) != len(p.Value):
			return fmt.Errorf("%w: %q has %d values and %d gradients", ErrInvalidParam, p.Name, len(p.Value), len(p.Grad))
		case p.Shape != nil && shapeLen(p.Shape) != p.Len():
			return fmt.Errorf("%w: %q has shape %v but %d values", ErrInvalidParam, p.Name, p.Shape, p.Len())
		}
		seen[p.Name] = true
	}
	return nil
}

// BroadcastParameters copies root's parameter values into every rank's
// parameters on rt (nil: the default runtime), so that all ranks start
// training from the same point. Every rank must pass parameters of the same
// names and lengths. The broadcasts of all parameters are in flight
// together.
func BroadcastParameters(ctx context.Context, rt *Runtime, params []*Param, root int) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	if err := checkParams(params); err != nil {
		return err
	}
	ts := make([]*Tensor, len(params))
	for i, p := range params {
		ts[i] = p.values("param/" + p.Name)
	}
	return broadcastAll(ctx, rt, ts, root)
}

// shapeLen is the product of the dimensions (-1 when one is negative).
func shapeLen(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}
