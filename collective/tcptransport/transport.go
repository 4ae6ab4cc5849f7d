package tcptransport

import (
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// transport is the collective.Transport of one rank: one conn per peer,
// formed when Connect returns (the eager peers) or on first use. Its
// goroutines are the watchers of shared-memory links (see shm.Link.Watch)
// and, while some link may still form on demand, the formation's accept
// loop, dials and link set-ups; all end by the time Close returns.
type transport struct {
	rank, size int
	addrs      []string
	cfg        Config
	tun        tuning
	f          *formation  // forms the links on demand
	budget     *shm.Budget // this rank's rings
	slots      []*linkSlot // indexed by peer; nil at rank
	closing    chan struct{}
	closeOnce  sync.Once

	mu     sync.Mutex
	conns  []*conn // the formed links, indexed by peer
	closed bool
}

// newTransport wraps the authenticated sockets of the eager links that f
// formed (socks, indexed by peer rank), runs their shared-memory handshake,
// and takes over f to form the other links on demand.
func newTransport(cfg Config, tun tuning, f *formation, socks []lanes) *transport {
	t := &transport{rank: cfg.Rank, size: cfg.Size, addrs: cfg.Addrs, cfg: cfg, tun: tun, f: f,
		slots: make([]*linkSlot, cfg.Size), conns: make([]*conn, cfg.Size), closing: make(chan struct{})}
	t.budget = shm.NewBudget(f.localEager())
	rings, broken := offerShm(cfg, tun.procDir, socks, t.budget.Eager)
	for peer := range t.slots {
		if peer == cfg.Rank {
			continue
		}
		s := &linkSlot{ready: make(chan struct{})}
		s.lazy = lazyConn{t: t, peer: peer}
		t.slots[peer] = s
		if !socks[peer].complete() {
			continue
		}
		c := newConn(socks[peer], cfg.Rank, peer, cfg.Addrs[peer], tun, rings[peer], broken[peer])
		t.conns[peer] = c
		s.formed.Store(c)
		close(s.ready)
	}
	f.handOver(t.form)
	return t
}

// Rank returns this transport's rank.
func (t *transport) Rank() int { return t.rank }

// Size returns the number of ranks in the mesh.
func (t *transport) Size() int { return t.size }

// Conn returns the link to peer: the formed link, or one that forms on its
// first call. For a peer out of range, or this rank itself, it returns a
// Conn whose calls fail with collective.ErrInvalid.
func (t *transport) Conn(peer int) collective.Conn {
	if peer < 0 || peer >= t.size || t.slots[peer] == nil {
		return badConn{fmt.Errorf("tcptransport: rank %d: no link to peer %d in a job of %d ranks: %w",
			t.rank, peer, t.size, collective.ErrInvalid)}
	}
	s := t.slots[peer]
	if c := s.formed.Load(); c != nil {
		return c
	}
	return &s.lazy
}

// Host returns the data-plane address of peer, or "" if peer is out of
// range.
func (t *transport) Host(peer int) string {
	if peer < 0 || peer >= t.size {
		return ""
	}
	return t.addrs[peer]
}

// Close stops forming links and closes every socket. Pending and later
// calls on this transport fail with collective.ErrClosed (a link that had
// already failed keeps its first cause); peers see collective.ErrPeerGone.
// Close always returns nil.
func (t *transport) Close() error {
	t.closeOnce.Do(func() {
		close(t.closing)
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.f.stop()
		// Links still forming lose their sockets, so that their
		// shared-memory handshakes end at once; a set-up that finishes
		// now finds the transport closed.
		for peer, s := range t.slots {
			if s != nil && s.formed.Load() == nil {
				t.f.closeLanes(peer)
			}
		}
		t.f.waitSetups()
		t.mu.Lock()
		conns := append([]*conn(nil), t.conns...)
		t.mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.fail(c.closedError())
			}
		}
		for _, c := range conns {
			if c != nil {
				c.link.Wait()
			}
		}
	})
	return nil
}
