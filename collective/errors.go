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
