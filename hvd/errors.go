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

	// Training layer (optimizers, checkpoints).
	// ErrInvalidParam: a parameter is nil, unnamed, named twice, or its
	// gradient and values differ in length.
	ErrInvalidParam = errors.New("hvd: invalid parameter")
	// ErrOptimizerState: an optimizer state does not fit the optimizer (a
	// slot is missing, unknown, or of the wrong length).
	ErrOptimizerState = errors.New("hvd: optimizer state does not match the optimizer")
	// ErrGradReady: a gradient was reported for an unknown parameter, or
	// more often than BackwardPassesPerStep times before Step.
	ErrGradReady = errors.New("hvd: bad gradient report")
	// ErrBadCheckpoint: a checkpoint file is truncated, corrupted, or not a
	// checkpoint.
	ErrBadCheckpoint = errors.New("hvd: bad checkpoint")
)
