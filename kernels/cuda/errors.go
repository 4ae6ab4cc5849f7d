//go:build cuda

package cuda

import "errors"

// Sentinel errors of package cuda. Returned errors wrap them with %w (and,
// where it applies, the matching sentinel of package kernels as well).
var (
	// ErrNoDevice reports a device ordinal outside [0, DeviceCount()).
	ErrNoDevice = errors.New("cuda: no such device")
	// ErrUnsupported reports an element type, operator or conversion the
	// kernels do not implement (or an invalid kernels.DType or kernels.Op).
	ErrUnsupported = errors.New("cuda: unsupported")
	// ErrArgument reports a bad argument: a negative length, a nil stream or
	// event, a null or misaligned device pointer, a bad scale factor.
	ErrArgument = errors.New("cuda: invalid argument")
	// ErrClosed reports use of a Context, Stream or Event after Close.
	ErrClosed = errors.New("cuda: use of closed object")
	// ErrDriver reports a failed CUDA driver call; the driver's own error
	// is wrapped too.
	ErrDriver = errors.New("cuda: driver call failed")
)
