package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors of the engine; errors.Is matches them through every
// wrapping. The data-plane sentinels (ErrTimeout, ErrPeerGone, ...) are
// collective's: an engine's operations fail with those too.
var (
	// ErrDuplicateName: a tensor name was submitted to an Engine while an
	// operation of the same name is still in flight there.
	ErrDuplicateName = errors.New("engine: tensor name already in flight")
	// ErrShutdown: the Engine was shut down (here, or on a peer rank).
	ErrShutdown = errors.New("engine: engine shut down")
	// ErrMismatch: ranks submitted the same tensor name with disagreeing
	// parameters (see MismatchError).
	ErrMismatch = errors.New("engine: mismatched tensor")
	// ErrStall: tensors waited for missing ranks longer than the stall
	// shutdown time, or than OpTimeout where that is shorter or the stall
	// shutdown time is 0 (the error then wraps collective.ErrTimeout too).
	ErrStall = errors.New("engine: stalled")
	// ErrJoined: an operation cannot run because a rank has joined (only
	// sum and average all-reduces take joined ranks).
	ErrJoined = errors.New("engine: rank joined")
)

// MismatchError reports that two ranks submitted the same tensor with
// different parameters. Every rank's operation on that tensor fails with
// the same MismatchError; errors.Is(err, ErrMismatch) holds.
type MismatchError struct {
	Name   string // tensor name
	Field  string // "shape", "dtype", "op", "kind", "root", ...
	RankA  int    // the first rank that submitted the tensor
	ValueA string // its value of Field
	RankB  int    // a rank that disagrees with RankA
	ValueB string // its value of Field
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("engine: tensor %q: %s mismatch: rank %d has %s, rank %d has %s",
		e.Name, e.Field, e.RankA, e.ValueA, e.RankB, e.ValueB)
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }
