package collective

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
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
	// ErrOpTimeout: an operation ran past Options.OpTimeout (an
	// *OpTimeoutError, which wraps ErrTimeout too and names the peer the
	// operation waited for).
	ErrOpTimeout = errors.New("collective: no answer within the op timeout")
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

func (e *OpError) Error() string { return e.where() + ": " + e.Err.Error() }

// where names the operation, the step, the rank and the peer (and its
// host): what Error says before the cause.
func (e *OpError) where() string {
	s := fmt.Sprintf("collective: %s #%d step %d on rank %d", e.Op, e.Seq, e.Step, e.Rank)
	if e.Peer >= 0 {
		s += fmt.Sprintf(" with peer %d", e.Peer)
		if e.Host != "" {
			s += " (" + e.Host + ")"
		}
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *OpError) Unwrap() error { return e.Err }

// OpTimeoutError fails a Comm whose operation ran past Options.OpTimeout:
// it names the operation and the peer it last began to send to or receive
// from, which is the one that did not answer unless that peer was itself
// waiting for another. It wraps ErrOpTimeout and ErrTimeout.
type OpTimeoutError struct {
	Limit time.Duration // Options.OpTimeout
	Rank  int           // the rank whose operation it was
	Seq   uint64        // the operation's number on the Comm
	Peer  int           // the peer it waited for (-1 if none yet)
	Host  string        // the peer's address, if known
	op    atomic.Pointer[OpError]
}

func (e *OpTimeoutError) Error() string {
	where := e.op.Load() // the operation's own account of its step
	if where == nil {
		where = &OpError{Op: "operation", Seq: e.Seq, Step: -1, Rank: e.Rank, Peer: e.Peer, Host: e.Host}
	}
	return fmt.Sprintf("%v (%v): %s", ErrOpTimeout, e.Limit, where.where())
}

// Unwrap returns ErrOpTimeout and ErrTimeout.
func (e *OpTimeoutError) Unwrap() []error { return []error{ErrOpTimeout, ErrTimeout} }
