package tcptransport

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// linkSlot is the transport's link to one peer: formed when Connect
// returns (an eager peer), or on first use.
type linkSlot struct {
	formed atomic.Pointer[conn] // the link, once formed
	ready  chan struct{}        // closed when formed or err is set
	err    error                // why the link could not form; set before ready closes
	lazy   lazyConn             // what Conn returns for a link not formed yet
}

// lazyConn is the collective.Conn of a link that forms on first use: the
// first call asks for it and waits until it has formed (or the call's
// context ends), and every call then goes to the formed link.
type lazyConn struct {
	t    *transport
	peer int
}

// get returns the formed link to the peer, forming it first if need be.
func (l *lazyConn) get(ctx context.Context, op string) (*conn, error) {
	s := l.t.slots[l.peer]
	if c := s.formed.Load(); c != nil {
		return c, nil
	}
	return l.t.await(ctx, l.peer, op)
}

// Send forms the link if need be, then sends on it.
func (l *lazyConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	c, err := l.get(ctx, opSend)
	if err != nil {
		return err
	}
	return c.Send(ctx, tag, p)
}

// SendsInPlace is the formed link's answer (see collective.InPlace); a
// link not formed yet sends nothing in place.
func (l *lazyConn) SendsInPlace(n int) bool {
	c := l.t.slots[l.peer].formed.Load()
	return c != nil && c.SendsInPlace(n)
}

// SendWait forms the link if need be, then sends on it, perhaps waiting
// for the peer's Recv (see collective.Rendezvous).
func (l *lazyConn) SendWait(ctx context.Context, tag collective.Tag, p []byte) error {
	c, err := l.get(ctx, opSend)
	if err != nil {
		return err
	}
	return c.SendWait(ctx, tag, p)
}

// ReducesOnArrival is the formed link's answer (see
// collective.ReduceReceiver); a link not formed yet does not.
func (l *lazyConn) ReducesOnArrival() bool {
	c := l.t.slots[l.peer].formed.Load()
	return c != nil && c.ReducesOnArrival()
}

// RecvReduce forms the link if need be, then receives and reduces on it.
func (l *lazyConn) RecvReduce(ctx context.Context, tag collective.Tag, dst []byte, esz int, reduce func(dst, src []byte)) error {
	c, err := l.get(ctx, opRecv)
	if err != nil {
		return err
	}
	return c.RecvReduce(ctx, tag, dst, esz, reduce)
}

// Recv forms the link if need be, then receives on it.
func (l *lazyConn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	c, err := l.get(ctx, opRecv)
	if err != nil {
		return err
	}
	return c.Recv(ctx, tag, p)
}

// SendVec forms the link if need be, then sends on it.
func (l *lazyConn) SendVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	c, err := l.get(ctx, opSend)
	if err != nil {
		return err
	}
	return c.SendVec(ctx, tag, parts)
}

// RecvVec forms the link if need be, then receives on it.
func (l *lazyConn) RecvVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	c, err := l.get(ctx, opRecv)
	if err != nil {
		return err
	}
	return c.RecvVec(ctx, tag, parts)
}

// Backlog is the formed link's (see collective.Backlogged); a link not
// formed yet holds nothing.
func (l *lazyConn) Backlog() int {
	if c := l.t.slots[l.peer].formed.Load(); c != nil {
		return c.Backlog()
	}
	return 0
}

// Buffered is the formed link's promise; a link not formed yet promises
// nothing, so that an operation on it is pipelined and its sends never
// wait in the caller's goroutine for the link to form.
func (l *lazyConn) Buffered(messages int) int {
	if c := l.t.slots[l.peer].formed.Load(); c != nil {
		return c.Buffered(messages)
	}
	return 0
}

// await asks for the link to peer and waits until it has formed, the
// transport closes or ctx ends. The higher rank of a pair dials; the lower
// one calls it to ask for that dial (see formation.dial).
func (t *transport) await(ctx context.Context, peer int, op string) (*conn, error) {
	s := t.slots[peer]
	t.f.dial(peer)
	select {
	case <-s.ready:
	case <-t.closing:
		return nil, fmt.Errorf("tcptransport: %s rank %d->%d: %w", op, t.rank, peer, collective.ErrClosed)
	case <-ctx.Done():
		return nil, ctxError(ctx, fmt.Sprintf("tcptransport: rank %d: the link to rank %d (%s) did not form before the %s's context ended",
			t.rank, peer, t.addrs[peer], op))
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.formed.Load(), nil
}

// form sets up the link to peer once both of its sockets are there: the
// shared-memory handshake for a peer on this host, then the conn. It runs
// on its own goroutine (see formation.onLazy), on both sides of the link
// at once, whichever asked for it.
func (t *transport) form(peer int, l lanes) {
	socks := make([]lanes, t.size)
	socks[peer] = l
	rings, broken := offerShm(t.cfg, t.tun.procDir, socks, t.budget.OnDemand)
	c := newConn(l, t.rank, peer, t.addrs[peer], t.tun, rings[peer], broken[peer])
	s := t.slots[peer]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[peer] = c
	if t.closed {
		c.fail(c.closedError())
	}
	s.formed.Store(c)
	close(s.ready)
	t.cfg.Logger.Debug("tcptransport: link formed on demand", "peer", peer, "path", pathOf(c))
}

// pathOf is the path c's frames take.
func pathOf(c *conn) Path {
	if _, ok := c.link.(*shm.Link); ok {
		return SharedMemory
	}
	return TCP
}

// CanExchange is the formed link's answer (see collective.Exchanger); a
// link not formed yet cannot.
func (l *lazyConn) CanExchange(from collective.Conn) bool {
	c := l.t.slots[l.peer].formed.Load()
	return c != nil && c.CanExchange(from)
}

// Exchange moves a frame each way on the formed links (see
// collective.Exchanger), which CanExchange found.
func (l *lazyConn) Exchange(ctx context.Context, tag collective.Tag, p [][]byte, from collective.Conn, rtag collective.Tag, q [][]byte, arrived func(n int)) (sendErr, recvErr error) {
	return l.t.slots[l.peer].formed.Load().Exchange(ctx, tag, p, from, rtag, q, arrived)
}
