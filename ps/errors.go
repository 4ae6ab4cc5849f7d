package ps

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the parameter servers and their client. Returned
// errors wrap them with %w; test with errors.Is. An error a server's
// handler returns reaches the client as text and is turned back into the
// same sentinel there.
var (
	// ErrConfig: a ServerConfig, ClientConfig or argument is invalid.
	ErrConfig = errors.New("ps: invalid configuration")
	// ErrAuth: a connection failed the job-secret handshake (usually a
	// wrong secret, or a TLS setting that differs between the two ends).
	ErrAuth = errors.New("ps: authentication failed")
	// ErrUnreachable: a server did not answer (refused or broken
	// connection, or no reply within the call timeout).
	ErrUnreachable = errors.New("ps: parameter server unreachable")
	// ErrBadRequest: a request does not match the variables' layout (an
	// unknown or missing variable, a wrong length, a malformed layout).
	ErrBadRequest = errors.New("ps: bad request")
	// ErrLayout: the servers already hold variables with another layout or
	// optimizer than Create asks for, or two servers disagree on it.
	ErrLayout = errors.New("ps: layout mismatch")
	// ErrNotCreated: no Create has run on the server (or, on a client,
	// neither Create nor Attach has succeeded).
	ErrNotCreated = errors.New("ps: variables not created")
	// ErrStopped: the server is stopping or stopped.
	ErrStopped = errors.New("ps: parameter server stopped")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("ps: client closed")
	// ErrProtocol: a server answered something this client does not
	// understand (another gorovod version, or a panic in a handler).
	ErrProtocol = errors.New("ps: protocol error")
)

// ServerError is how a client reports that it could not reach one
// parameter server: the handshake failed, the connection broke, the call
// timed out, or the server is stopping. Every such failure is one; use
// errors.As to learn which server. Errors the server answers (a bad
// request, a layout mismatch) are not ServerErrors, nor is the end of the
// caller's context.
type ServerError struct {
	Index int    // the server's index, its position in DialServers' addrs
	Addr  string // the address dialed
	Err   error  // what happened; wraps ErrUnreachable, ErrAuth or ErrStopped
}

// Error reads "ps: parameter server 1 (10.0.0.2:7000): …".
func (e *ServerError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = strings.TrimPrefix(e.Err.Error(), "ps: ")
	}
	return fmt.Sprintf("ps: parameter server %d (%s): %s", e.Index, e.Addr, msg)
}

// Unwrap returns Err, so errors.Is sees the sentinel it wraps.
func (e *ServerError) Unwrap() error { return e.Err }

// PSServer names the server: how the coordinator tells, from a step's
// error, that a parameter server failed and the job must end.
func (e *ServerError) PSServer() (index int, addr string) { return e.Index, e.Addr }

// srvRemoteSentinels are the errors a server's handler may return;
// srvDecodeRemote maps their text back to them on the client.
var srvRemoteSentinels = []error{ErrBadRequest, ErrLayout, ErrNotCreated, ErrStopped}

// srvDecodeRemote turns the text of a server-side error back into an
// error wrapping the matching sentinel, keeping the server's details.
func srvDecodeRemote(msg string) error {
	for _, s := range srvRemoteSentinels {
		if rest, ok := strings.CutPrefix(msg, s.Error()); ok {
			return fmt.Errorf("%w%s", s, rest)
		}
	}
	return fmt.Errorf("%w: server error: %s", ErrProtocol, msg)
}
