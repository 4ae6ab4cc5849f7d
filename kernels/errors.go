package kernels

import "errors"

// Sentinel errors of package kernels. Returned errors wrap them with %w.
var (
	// ErrDType reports an unknown or unsupported element type.
	ErrDType = errors.New("kernels: invalid dtype")
	// ErrOp reports an unknown reduction operator.
	ErrOp = errors.New("kernels: invalid reduce op")
	// ErrLength reports buffers whose lengths disagree or are not a whole number of elements.
	ErrLength = errors.New("kernels: bad buffer length")
)

// ErrFactor reports a scale factor that cannot be applied: a NaN or an
// infinity for an integer element type.
var ErrFactor = errors.New("kernels: bad scale factor")

// ErrAlign reports a buffer whose start is not aligned to its element size
// (Reduce and Scale view buffers as typed slices, which needs alignment).
var ErrAlign = errors.New("kernels: misaligned buffer")
