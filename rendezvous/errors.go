package rendezvous

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors of package rendezvous. Returned errors wrap them with %w;
// test with errors.Is. Errors that a handler returns on the server reach the
// client as text and are turned back into the same sentinel there.
var (
	// ErrConfig: a ServerConfig, Dial argument or option is invalid.
	ErrConfig = errors.New("rendezvous: invalid configuration")
	// ErrAuth: a connection failed the job-secret handshake (wrong secret,
	// or not a gorovod rendezvous peer).
	ErrAuth = errors.New("rendezvous: authentication failed")
	// ErrUnreachable: the server did not answer (refused connection,
	// broken connection, or no reply before the call's deadline).
	ErrUnreachable = errors.New("rendezvous: server unreachable")
	// ErrLost: Watch gave up on the server after its grace period.
	ErrLost = errors.New("rendezvous: lost the rendezvous server")
	// ErrAborted: the launcher aborted the job (Server.Abort); the message
	// carries its reason.
	ErrAborted = errors.New("rendezvous: job aborted")
	// ErrConflict: a rank registered twice with different data addresses.
	ErrConflict = errors.New("rendezvous: conflicting registration")
	// ErrBadRequest: a call carried an out-of-range rank, an empty address,
	// or an oversized key or value.
	ErrBadRequest = errors.New("rendezvous: bad request")
	// ErrIncomplete: the peer table was not complete when the caller's
	// context ended; see MissingError for which ranks were absent.
	ErrIncomplete = errors.New("rendezvous: peer table incomplete")
	// ErrNotSet: a key was still unset when the caller's context ended.
	ErrNotSet = errors.New("rendezvous: key not set")
	// ErrProtocol: the server answered something this client does not
	// understand (a different gorovod version, or a server-side panic).
	ErrProtocol = errors.New("rendezvous: protocol error")
	// ErrStopped: the server is stopped or was never started.
	ErrStopped = errors.New("rendezvous: server stopped")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("rendezvous: client closed")
	// ErrNoMetrics: the server takes no metrics (its ServerConfig has no
	// OnMetrics).
	ErrNoMetrics = errors.New("rendezvous: the server takes no metrics")
)

// remoteSentinels are the errors a handler may return; decodeRemote maps
// their text back to them on the client.
var remoteSentinels = []error{ErrAborted, ErrConflict, ErrBadRequest, ErrStopped, ErrNoMetrics}

// decodeRemote turns the text of a server-side error back into an error that
// wraps the matching sentinel, keeping the server's details.
func decodeRemote(msg string) error {
	for _, s := range remoteSentinels {
		if rest, ok := strings.CutPrefix(msg, s.Error()); ok {
			return fmt.Errorf("%w%s", s, rest)
		}
	}
	return fmt.Errorf("%w: server error: %s", ErrProtocol, msg)
}

// MissingError reports the ranks that had not registered when a wait for the
// peer table ended. It matches ErrIncomplete and the reason the wait ended
// (for example context.DeadlineExceeded) with errors.Is.
type MissingError struct {
	Missing []Peer        // ranks not registered, with their planned hosts (Addr is empty)
	Waited  time.Duration // how long the caller waited
	Err     error         // why the wait ended
}

// Error reads like "rendezvous: ranks 2 (host b), 3 (host b) never
// registered within 30s".
func (e *MissingError) Error() string {
	var b strings.Builder
	b.WriteString("rendezvous: rank")
	if len(e.Missing) != 1 {
		b.WriteString("s")
	}
	for i, p := range e.Missing {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", p.Rank)
		if p.Host != "" {
			fmt.Fprintf(&b, " (host %s)", p.Host)
		}
	}
	fmt.Fprintf(&b, " never registered within %s", roundWait(e.Waited))
	return b.String()
}

// Unwrap lets errors.Is match ErrIncomplete and the underlying reason.
func (e *MissingError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrIncomplete}
	}
	return []error{ErrIncomplete, e.Err}
}

// roundWait rounds a waiting time for messages: whole seconds from 1s up,
// milliseconds below.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
