package memtransport

import (
	"bytes"
	"context"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// conn is one rank's end of a link; it implements collective.Conn.
type conn struct {
	net        *Network
	l          *link
	side       int
	rank, peer int
}

// Send queues a copy of p for the peer and returns without waiting for it.
func (c *conn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	return c.send(ctx, tag, bytes.Clone(p))
}

// SendVec queues the parts joined into one message (see
// collective.Vectored).
func (c *conn) SendVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	return c.send(ctx, tag, bytes.Join(parts, nil))
}

// RecvVec receives the next message and copies it into parts in order.
func (c *conn) RecvVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	data := make([]byte, n)
	if err := c.Recv(ctx, tag, data); err != nil {
		return err
	}
	for _, p := range parts {
		data = data[copy(p, data):]
	}
	return nil
}

// send queues data, which the link now owns, for the peer.
func (c *conn) send(ctx context.Context, tag collective.Tag, data []byte) error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &l.ends[c.side]
	switch {
	case e.err != nil:
		return e.err
	case ctx.Err() != nil:
		return l.failLocked(c.side, errContext("send", c.rank, c.peer, ctx.Err()))
	case e.peerErr != nil:
		return e.peerErr
	case c.net.faultNow():
		l.breakLocked()
		return e.err
	}
	dst := &l.ends[1-c.side]
	at := time.Now().Add(dst.delay)
	if at.Before(dst.lastAt) {
		at = dst.lastAt // never overtake an earlier, slower message
	}
	dst.lastAt = at
	dst.inbox = append(dst.inbox, message{tag: tag, data: data, at: at})
	l.notifyLocked()
	return nil
}

// Recv waits for the next message from the peer and copies it into p.
func (c *conn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	for {
		c.l.mu.Lock()
		until, done, err := c.tryRecvLocked(ctx, tag, p)
		changed := c.l.changed
		c.l.mu.Unlock()
		if done {
			return err
		}
		if err := wait(ctx, changed, until); err != nil {
			c.l.mu.Lock()
			err = c.l.failLocked(c.side, errContext("recv", c.rank, c.peer, err))
			c.l.mu.Unlock()
			return err
		}
	}
}

// tryRecvLocked takes the next message into p if one is due. Otherwise it
// reports done == false and, if a message is queued but delayed, until when
// to wait for it.
func (c *conn) tryRecvLocked(ctx context.Context, tag collective.Tag, p []byte) (until time.Time, done bool, err error) {
	l := c.l
	e := &l.ends[c.side]
	switch {
	case e.err != nil:
		return time.Time{}, true, e.err
	case ctx.Err() != nil:
		return time.Time{}, true, l.failLocked(c.side, errContext("recv", c.rank, c.peer, ctx.Err()))
	case len(e.inbox) == 0 && e.peerErr != nil:
		return time.Time{}, true, l.failLocked(c.side, e.peerErr)
	case len(e.inbox) == 0:
		return time.Time{}, false, nil
	case time.Now().Before(e.inbox[0].at):
		return e.inbox[0].at, false, nil
	}
	m := e.inbox[0]
	e.inbox[0] = message{}
	e.inbox = e.inbox[1:]
	if m.tag != tag || len(m.data) != len(p) {
		return time.Time{}, true, l.failLocked(c.side, errMismatch(c.rank, c.peer, m, tag, len(p)))
	}
	copy(p, m.data)
	return time.Time{}, true, nil
}

// badConn is returned for a peer that does not exist; every call fails.
type badConn struct{ err error }

func (b badConn) Send(context.Context, collective.Tag, []byte) error { return b.err }
func (b badConn) Recv(context.Context, collective.Tag, []byte) error { return b.err }

func (b badConn) SendVec(context.Context, collective.Tag, [][]byte) error { return b.err }
func (b badConn) RecvVec(context.Context, collective.Tag, [][]byte) error { return b.err }
