package engine

import (
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// Kind is the collective operation a Request asks an Engine for.
type Kind uint8

// The kinds of Request. The zero value is invalid.
const (
	KindAllreduce Kind = iota + 1
	KindAllgather
	KindBroadcast
	KindAlltoall
	KindReducescatter
	KindBarrier
)

var kindNames = [...]string{
	KindAllreduce: "allreduce", KindAllgather: "allgather", KindBroadcast: "broadcast",
	KindAlltoall: "alltoall", KindReducescatter: "reducescatter", KindBarrier: "barrier",
}

// Valid reports whether k is a defined Kind.
func (k Kind) Valid() bool { return k >= KindAllreduce && k <= KindBarrier }

// String returns the lower-case name ("allreduce", ...).
func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// Request is one rank's description of a named collective operation, as it
// submits it to an Engine. Every rank submits the same Name with agreeing
// fields; the Engine checks that they agree before running it.
type Request struct {
	Name  string
	Kind  Kind
	DType kernels.DType
	// Shape of the tensor; its product is the element count. All-gather
	// and all-to-all ranks may differ in the first dimension only.
	Shape []int
	// ReduceOp is the reduction of an all-reduce or reduce-scatter.
	ReduceOp kernels.Op
	// Root is the rank whose data a broadcast copies.
	Root int
	// Prescale and Postscale multiply the input before and the result
	// after a reduction; zero means 1 (see ReduceOptions).
	Prescale, Postscale float64
	// Splits are the rows (first-dimension entries) an all-to-all sends to
	// each rank, in rank order; nil splits the rows evenly.
	Splits []int
	// Group, when not zero, makes this all-reduce, all-gather or
	// reduce-scatter one of GroupSize members of a group: the members are
	// negotiated and completed as one unit (all-reduces of a group are
	// also fused; the other kinds run one by one in the same cycle, and
	// their handles complete together after it). Every rank uses the same
	// id and size.
	Group     uint64
	GroupSize int
	// Clobber lets a reduce-scatter reduce in the submitted buffer itself,
	// which it leaves changed, instead of in a copy; the Output is this
	// rank's share within that buffer. It is this rank's choice, not
	// negotiated.
	Clobber bool
	// Out, when it has exactly the size of an all-gather's result,
	// receives the result instead of a new buffer (the Output is Out).
	// The submitted buffer may be Out's own share of it. It is this rank's
	// choice, not negotiated.
	Out []byte
}

// Count is the number of elements Shape describes.
func (r *Request) Count() int {
	n := 1
	for _, d := range r.Shape {
		n *= d
	}
	return n
}

// Bytes is the size in bytes of the tensor Shape and DType describe.
func (r *Request) Bytes() int { return r.Count() * r.DType.Size() }

// rowElems is the number of elements per entry of the first dimension.
func (r *Request) rowElems() int {
	n := 1
	if len(r.Shape) > 1 {
		for _, d := range r.Shape[1:] {
			n *= d
		}
	}
	return n
}

// rows is the first dimension (0 for a scalar shape).
func (r *Request) rows() int {
	if len(r.Shape) == 0 {
		return 0
	}
	return r.Shape[0]
}

// Equal reports whether r and o ask for exactly the same operation.
func (r *Request) Equal(o *Request) bool {
	return r.Name == o.Name && r.Kind == o.Kind && r.DType == o.DType &&
		slices.Equal(r.Shape, o.Shape) && r.ReduceOp == o.ReduceOp && r.Root == o.Root &&
		r.Prescale == o.Prescale && r.Postscale == o.Postscale &&
		slices.Equal(r.Splits, o.Splits) && (r.Splits == nil) == (o.Splits == nil) &&
		r.Group == o.Group && r.GroupSize == o.GroupSize
}

// reduces reports whether the kind reduces (and so uses op and scales).
func (k Kind) reduces() bool { return k == KindAllreduce || k == KindReducescatter }

// groups reports whether requests of the kind may form groups.
func (k Kind) groups() bool {
	return k == KindAllreduce || k == KindAllgather || k == KindReducescatter
}

// check validates r on its own for a job of size ranks; the negotiation
// turns a problem into an error every rank reports.
func (r *Request) check(size int) error {
	switch {
	case !r.Kind.Valid():
		return fmt.Errorf("invalid kind %v", r.Kind)
	case r.Kind != KindBarrier && !r.DType.Valid():
		return fmt.Errorf("invalid dtype %v", r.DType)
	case r.Kind.reduces() && !r.ReduceOp.Valid():
		return fmt.Errorf("invalid reduce op %v", r.ReduceOp)
	case r.Kind.reduces() && r.ReduceOp == kernels.Adasum && (r.Kind != KindAllreduce || r.DType != kernels.F32 && r.DType != kernels.F64):
		return fmt.Errorf("adasum is an all-reduce of float32 or float64, not a %v of %v", r.Kind, r.DType)
	case r.Kind == KindBroadcast && (r.Root < 0 || r.Root >= size):
		return fmt.Errorf("root %d outside [0, %d)", r.Root, size)
	case r.Group != 0 && (!r.Kind.groups() || r.GroupSize < 1):
		return fmt.Errorf("group %d of size %d: only all-reduces, all-gathers and reduce-scatters of a positive group size group", r.Group, r.GroupSize)
	}
	for _, d := range r.Shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", r.Shape)
		}
	}
	if (r.Kind == KindAllgather || r.Kind == KindAlltoall || r.Kind == KindReducescatter) && len(r.Shape) == 0 {
		return fmt.Errorf("%v needs a shape with a first dimension", r.Kind)
	}
	if r.Kind == KindAlltoall {
		_, err := r.splits(size)
		return err
	}
	return nil
}

// splits returns the all-to-all rows per destination rank, resolving nil
// splits to an even division.
func (r *Request) splits(size int) ([]int, error) {
	rows := r.rows()
	if r.Splits == nil {
		if rows%size != 0 {
			return nil, fmt.Errorf("%d rows do not split evenly over %d ranks; give splits", rows, size)
		}
		s := make([]int, size)
		for i := range s {
			s[i] = rows / size
		}
		return s, nil
	}
	sum := 0
	for _, s := range r.Splits {
		if s < 0 {
			return nil, fmt.Errorf("negative split in %v", r.Splits)
		}
		sum += s
	}
	if len(r.Splits) != size || sum != rows {
		return nil, fmt.Errorf("splits %v must have %d entries adding up to %d rows", r.Splits, size, rows)
	}
	return r.Splits, nil
}

// factors are the request's prescale and postscale in a job of size ranks
// (Average's division included), as the collective applies them.
func (r *Request) factors(size int) (pre, post float64) {
	return collective.ReduceOptions{Prescale: r.Prescale, Postscale: r.Postscale}.Factors(r.ReduceOp, size)
}
