package hvd

import "errors"

// Sentinel errors of package hvd; returned errors wrap them with %w.
var (
	// ErrNotInitialized: a package-level function was called before Init.
	ErrNotInitialized = errors.New("hvd: not initialized (call hvd.Init first)")
	// ErrShutdown: the runtime was shut down.
	ErrShutdown = errors.New("hvd: runtime is shut down")
	// ErrDuplicateName: a tensor name was submitted while an operation of
	// the same name is still in flight.
	ErrDuplicateName = errors.New("hvd: duplicate tensor name in flight")
	// ErrInvalidTensor: a tensor's dtype, shape and data disagree.
	ErrInvalidTensor = errors.New("hvd: invalid tensor")
	// ErrNoCUDA: a GPU feature was used in a build without CUDA.
	ErrNoCUDA = errors.New("hvd: built without CUDA support (rebuild with -tags cuda)")
	// ErrLauncherLost: the launcher (gorun) died or stopped the job.
	ErrLauncherLost = errors.New("hvd: lost contact with the launcher")
)
