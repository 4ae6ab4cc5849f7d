package collective

import (
	"errors"
	"fmt"
)

// Sentinel errors of package collective and its transports. Returned errors
// wrap them with %w; test with errors.Is.
var (
	// ErrClosed: the transport or communicator was closed locally.
	ErrClosed = errors.New("collective: closed")
	// ErrPeerGone: the link to a peer broke (EOF, reset, peer dropped).
	ErrPeerGone = errors.New("collective: peer gone")
	// ErrProtocol: a frame had an unexpected tag or length, or was malformed.
	ErrProtocol = errors.New("collective: protocol error")
	// ErrAuth: a connection failed the job-secret handshake.
	ErrAuth = errors.New("collective: authentication failed")
	// ErrTimeout: a deadline passed before the peer answered.
	ErrTimeout = errors.New("collective: timeout")
	// ErrInvalid: an argument is out of range (bad count, root, dtype, ...).
	ErrInvalid = errors.New("collective: invalid argument")

	// ErrDuplicateName: a tensor name was submitted to an Engine while an
	// operation of the same name is still in flight there.
	ErrDuplicateName = errors.New("collective: tensor name already in flight")
	// ErrShutdown: the Engine was shut down (here, or on a peer rank).
	ErrShutdown = errors.New("collective: engine shut down")
	// ErrMismatch: ranks submitted the same tensor name with disagreeing
	// parameters (see MismatchError).
	ErrMismatch = errors.New("collective: mismatched tensor")
	// ErrStall: tensors waited for missing ranks longer than the stall
	// shutdown time.
	ErrStall = errors.New("collective: stalled")
	// ErrJoined: an operation cannot run because a rank has joined (only
	// sum and average all-reduces take joined ranks).
	ErrJoined = errors.New("collective: rank joined")
)

// OpError describes a failed collective operation: which operation, at which
// step, on which rank, talking to which peer (and its host).
type OpError struct {
	Op   string // "allreduce", "allgather", ...
	Seq  uint64 // operation number on this communicator
	Step int    // message index inside the operation (-1 if none)
	Rank int    // the rank reporting the error
	Peer int    // the peer involved (-1 if none)
	Host string // the peer's address, if known
	Err  error
}

func (e *OpError) Error() string {
	s := fmt.Sprintf("collective: %s #%d step %d on rank %d", e.Op, e.Seq, e.Step, e.Rank)
	if e.Peer >= 0 {
		s += fmt.Sprintf(" with peer %d", e.Peer)
		if e.Host != "" {
			s += " (" + e.Host + ")"
		}
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying cause.
func (e *OpError) Unwrap() error { return e.Err }

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
	return fmt.Sprintf("collective: tensor %q: %s mismatch: rank %d has %s, rank %d has %s",
		e.Name, e.Field, e.RankA, e.ValueA, e.RankB, e.ValueB)
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }
