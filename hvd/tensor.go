package hvd

import (
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

// Tensor is a named, typed, dense buffer. Data holds the elements in
// row-major order; Shape's product is the element count. An empty (nil)
// Shape means a vector of all the elements of Data, which must then be a
// whole number of elements: every operation sees the shape [Count()], the
// same shape NewTensor gives a tensor without one, so ranks may mix the two
// forms.
type Tensor struct {
	Name  string
	DType kernels.DType
	Shape []int
	Data  []byte
}

// NewTensor wraps a typed slice (without copying) as a named tensor. With
// no shape it is a vector of len(data) elements.
func NewTensor[T kernels.Element](name string, data []T, shape ...int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	return &Tensor{Name: name, DType: kernels.DTypeOf[T](), Shape: shape, Data: kernels.AsBytes(data)}
}

// Values views a tensor's data as a typed slice (nil if T does not match).
func Values[T kernels.Element](t *Tensor) []T {
	if t == nil || kernels.DTypeOf[T]() != t.DType {
		return nil
	}
	return kernels.FromBytes[T](t.Data)
}

// Count is the number of elements the shape describes; with an empty
// Shape, the number of whole elements in Data (0 for an invalid DType).
func (t *Tensor) Count() int {
	if len(t.Shape) > 0 {
		return shapeCount(t.Shape)
	}
	if !t.DType.Valid() {
		return 0
	}
	return len(t.Data) / t.DType.Size()
}

// shape is the shape every operation sees: Shape, or the vector [Count()]
// when Shape is empty.
func (t *Tensor) shape() []int {
	if len(t.Shape) == 0 {
		return []int{t.Count()}
	}
	return t.Shape
}

// shapeCount is the number of elements of a tensor of this shape.
func shapeCount(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// rowElems is the number of elements per entry of the first dimension.
func (t *Tensor) rowElems() int {
	n := 1
	for _, d := range t.shape()[1:] {
		n *= d
	}
	return n
}

// validate checks that t is a named tensor of a valid dtype whose Data
// holds exactly the elements its shape describes.
func (t *Tensor) validate() error {
	if t == nil {
		return fmt.Errorf("%w: nil tensor", ErrInvalidTensor)
	}
	if err := validateMeta(t.Name, t.DType, t.shape()); err != nil {
		return err
	}
	if len(t.Shape) == 0 && len(t.Data)%t.DType.Size() != 0 {
		return fmt.Errorf("%w: %q has no shape and %d bytes, not a whole number of %v elements", ErrInvalidTensor, t.Name, len(t.Data), t.DType)
	}
	if want := t.Count() * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("%w: %q of shape %v and dtype %v needs %d bytes, has %d", ErrInvalidTensor, t.Name, t.Shape, t.DType, want, len(t.Data))
	}
	return nil
}

// validateMeta checks what host and device tensors share: a name, a valid
// dtype and a non-empty shape without negative dimensions (a host Tensor
// passes its shape(), so only a DeviceTensor can lack one).
func validateMeta(name string, dt kernels.DType, shape []int) error {
	if name == "" {
		return fmt.Errorf("%w: a tensor needs a name", ErrInvalidTensor)
	}
	if !dt.Valid() {
		return fmt.Errorf("%w: %q has dtype %v", ErrInvalidTensor, name, dt)
	}
	if len(shape) == 0 {
		return fmt.Errorf("%w: %q has no shape", ErrInvalidTensor, name)
	}
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("%w: %q has shape %v", ErrInvalidTensor, name, shape)
		}
	}
	return nil
}
