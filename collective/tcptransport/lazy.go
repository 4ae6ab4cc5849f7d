package tcptransport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
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
	var rings []*shmRings
	if !t.cfg.NoSharedMemory {
		rings = offerShm(t.cfg, t.tun.procDir, socks, t.budget.lazy)
	}
	var r *shmRings
	if rings != nil {
		r = rings[peer]
	}
	c := newConn(l, t.rank, peer, t.addrs[peer], t.tun, r)
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
	if _, ok := c.link.(*shmLink); ok {
		return SharedMemory
	}
	return TCP
}

// Shared-memory budget: the most ring capacity one rank creates, whatever
// the number of ranks on its host. Each link to a peer on the host costs
// the capacity of the ring this rank writes (the peer's ring is the
// peer's). The eager links share eagerBytes; a link formed on demand gets
// the largest capacity up to a quarter of what is left (so a few such
// links still get large rings, and many get small ones), at least
// shmring.MinCapacity; once that no longer fits, links stay on TCP.
const (
	shmBudgetBytes = 16 << 20
	eagerBytes     = 12 << 20
)

// shmBudget hands out ring capacities under the budget.
type shmBudget struct {
	mu    sync.Mutex
	eager int // the capacity of each eager link's ring; 0 when none fits
	spent int // bytes of rings created so far
}

// newShmBudget sizes the eager links' rings: the largest power of two up
// to shmring.MaxCapacity that lets localEager of them fit in eagerBytes
// (4 MiB each for up to 3 links, 1 MiB for up to 12, ...).
func newShmBudget(localEager int) *shmBudget {
	b := &shmBudget{}
	if localEager == 0 {
		return b
	}
	for c := shmring.MaxCapacity; c >= shmring.MinCapacity; c /= 2 {
		if c*localEager <= eagerBytes {
			b.eager = c
			break
		}
	}
	return b
}

// forEager returns the capacity of an eager link's ring, or 0 (stay on
// TCP) when the budget has no room left.
func (b *shmBudget) forEager(int) int {
	return b.take(func(int) int { return max(b.eager, shmring.MinCapacity) })
}

// lazy returns the capacity of the ring of a link formed on demand, or 0.
func (b *shmBudget) lazy(int) int {
	return b.take(func(left int) int {
		c := shmring.MaxCapacity
		for c > shmring.MinCapacity && c > left/4 {
			c /= 2
		}
		return c
	})
}

// take spends the capacity that size chooses from what is left of the
// budget, if it fits, and returns it; 0 if it does not.
func (b *shmBudget) take(size func(left int) int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := size(shmBudgetBytes - b.spent)
	if b.spent+c > shmBudgetBytes {
		return 0
	}
	b.spent += c
	return c
}
