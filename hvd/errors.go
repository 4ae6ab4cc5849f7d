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
	// ErrInvalidTensor: a tensor is nil or unnamed, or its dtype, shape
	// and data disagree, or an operation's parameters do not fit it (a root
	// or splits out of range). errors.Is(ErrInvalidTensor,
	// ErrInvalidArgument) holds.
	ErrInvalidTensor error = &narrowError{"hvd: invalid tensor", ErrInvalidArgument}
	// ErrNoCUDA: a GPU feature was used in a build without CUDA.
	ErrNoCUDA = errors.New("hvd: built without CUDA support (rebuild with -tags cuda)")
	// ErrLauncherLost: the launcher (gorun) died or stopped the job.
	ErrLauncherLost = errors.New("hvd: lost contact with the launcher")
	// ErrNotInProcessSet: an operation was submitted to a ProcessSet that
	// does not include this rank.
	ErrNotInProcessSet = errors.New("hvd: rank is not in the process set")
	// ErrProcessSetRemoved: an operation was submitted to a ProcessSet
	// after RemoveProcessSet (or the runtime's Shutdown) removed it.
	ErrProcessSetRemoved = errors.New("hvd: process set was removed")

	// What a collective operation fails with, for callers to branch on
	// without importing collective or collective/engine: every error that
	// hvd returns from an operation in these situations matches the
	// sentinel with errors.Is (and still matches the engine's or
	// collective's own sentinel, and reads as before).

	// ErrMismatch: ranks submitted the same tensor name with disagreeing
	// dtypes, shapes, operations, reduction ops or roots; the error names
	// the tensor, the field and two ranks with their values.
	ErrMismatch = errors.New("hvd: ranks disagree about a tensor")
	// ErrStall: ranks waited for another rank longer than the stall
	// shutdown time or the operation timeout (Config.StallShutdown,
	// Config.OpTimeout): some rank did not submit a tensor that others
	// did, or stopped answering. The error names the tensors and the ranks
	// that were missing.
	ErrStall = errors.New("hvd: stalled waiting for other ranks")
	// ErrJoined: an operation could not run because a rank has joined
	// (Join): only sum and average all-reduces take joined ranks, and a
	// joined rank submits nothing until every rank has joined.
	ErrJoined = errors.New("hvd: a rank has joined")
	// ErrPeerGone: another rank left the job: its links broke (its
	// process died or closed its connections) or it shut its runtime down
	// while tensors were in flight (the error then matches ErrShutdown
	// too). The error names the rank where it is known.
	ErrPeerGone = errors.New("hvd: a peer rank is gone")
	// ErrInvalidArgument: a call's argument is invalid: a nil or malformed
	// tensor (ErrInvalidTensor), a root or splits out of range, an
	// AllreduceInto output that does not fit its input, a name twice in a
	// group, an invalid parameter (ErrInvalidParam), a nil pointer to
	// BroadcastObject, a value AllgatherObject cannot encode or that is
	// larger than MaxObjectBytes, a DistributedOptimizer option out of
	// range. Nothing was submitted, or
	// the operation failed on every rank.
	ErrInvalidArgument = errors.New("hvd: invalid argument")

	// Training layer (optimizers, checkpoints).
	// ErrInvalidParam: a parameter is nil, unnamed, named twice, or its
	// gradient and values differ in length.
	// errors.Is(ErrInvalidParam, ErrInvalidArgument) holds.
	ErrInvalidParam error = &narrowError{"hvd: invalid parameter", ErrInvalidArgument}
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

// narrowError is a sentinel that is a case of a broader one: it reads as
// msg, and errors.Is matches it against itself and against broader.
type narrowError struct {
	msg     string
	broader error
}

func (e *narrowError) Error() string { return e.msg }

// Is reports whether target is the broader sentinel.
func (e *narrowError) Is(target error) bool { return target == e.broader }
