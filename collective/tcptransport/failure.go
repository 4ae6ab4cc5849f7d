package tcptransport

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// Operation names used in error messages: "rank 0: send to peer 1 (addr)".
const (
	opSend = "send to"
	opRecv = "recv from"
	opLink = "link to"
)

// failure boxes a link's first error so it can live in an atomic.Pointer.
type failure struct{ err error }

// fail records err as the link's cause unless one is recorded already, and
// returns the recorded cause. The first caller to record a cause closes both
// sockets, which ends the other direction's pending call and tells the peer.
func (c *conn) fail(err error) error {
	if c.failed.CompareAndSwap(nil, &failure{err}) {
		_ = c.out.Close() // the cause is recorded; a close error adds nothing
		_ = c.in.Close()
		c.link.Down()
	}
	return c.failed.Load().err
}

// The conn is the shm.Conn of its shared-memory link: these three methods
// are how the link reads and records the conn's failure.

// Err returns the conn's failure; nil while it works.
func (c *conn) Err() error {
	if f := c.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// Gone fails the conn: the peer went away during op (see ioFail).
func (c *conn) Gone(op shm.Op, err error) error {
	if op == shm.Sending {
		return c.ioFail(opSend, err)
	}
	return c.ioFail(opRecv, err)
}

// Corrupt fails the conn after a bad frame (see protocolFail).
func (c *conn) Corrupt(msg string) error { return c.protocolFail("%s", msg) }

// where prefixes every error of the link: who, doing what, with whom.
func (c *conn) where(op string) string {
	return fmt.Sprintf("tcptransport: rank %d: %s peer %d (%s)", c.rank, op, c.peer, c.host)
}

// ioFail fails the link after a socket error. Unless a cause was already
// recorded (a local Close, a cancelled context, the other direction's
// failure), the peer is gone: EOF, reset or broken pipe.
func (c *conn) ioFail(op string, err error) error {
	if f := c.failed.Load(); f != nil {
		return f.err
	}
	return c.fail(fmt.Errorf("%s: %w: %w", c.where(op), collective.ErrPeerGone, err))
}

// protocolFail fails the link after a bad frame: the stream position is lost.
func (c *conn) protocolFail(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return c.fail(fmt.Errorf("%s: %w: %s", c.where(opRecv), collective.ErrProtocol, msg))
}

// closedError is the cause recorded on every link by Transport.Close.
func (c *conn) closedError() error {
	return fmt.Errorf("%s: %w", c.where(opLink), collective.ErrClosed)
}

// ctxError describes a call ended by its context. A deadline also wraps
// collective.ErrTimeout.
func ctxError(ctx context.Context, where string) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", where, collective.ErrTimeout, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}
