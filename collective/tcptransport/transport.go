package tcptransport

import (
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective"
)

// transport is the collective.Transport of one rank: one conn per peer.
// Its only goroutines are the watchers of shared-memory links (see
// shmLink.watch), which end by the time Close returns.
type transport struct {
	rank, size int
	addrs      []string
	conns      []*conn // indexed by peer; nil at rank
	closeOnce  sync.Once
}

// newTransport wraps the authenticated sockets of a formed mesh; socks is
// indexed by peer rank and socks[cfg.Rank] is empty. rings, nil or indexed
// like socks, holds the shared-memory rings of the links that have them.
func newTransport(cfg Config, tun tuning, socks []lanes, rings []*shmRings) *transport {
	t := &transport{rank: cfg.Rank, size: cfg.Size, addrs: cfg.Addrs, conns: make([]*conn, cfg.Size)}
	for peer, l := range socks {
		if !l.complete() {
			continue
		}
		var r *shmRings
		if rings != nil {
			r = rings[peer]
		}
		t.conns[peer] = newConn(l, cfg.Rank, peer, cfg.Addrs[peer], tun, r)
	}
	return t
}

// Rank returns this transport's rank.
func (t *transport) Rank() int { return t.rank }

// Size returns the number of ranks in the mesh.
func (t *transport) Size() int { return t.size }

// Conn returns the link to peer. For a peer out of range, or this rank
// itself, it returns a Conn whose calls fail with collective.ErrInvalid.
func (t *transport) Conn(peer int) collective.Conn {
	if peer < 0 || peer >= t.size || t.conns[peer] == nil {
		return badConn{fmt.Errorf("tcptransport: rank %d: no link to peer %d in a job of %d ranks: %w",
			t.rank, peer, t.size, collective.ErrInvalid)}
	}
	return t.conns[peer]
}

// Host returns the data-plane address of peer, or "" if peer is out of
// range.
func (t *transport) Host(peer int) string {
	if peer < 0 || peer >= t.size {
		return ""
	}
	return t.addrs[peer]
}

// Close closes every socket. Pending and later calls on this transport fail
// with collective.ErrClosed (a link that had already failed keeps its first
// cause); peers see collective.ErrPeerGone. Close always returns nil.
func (t *transport) Close() error {
	t.closeOnce.Do(func() {
		for _, c := range t.conns {
			if c != nil {
				c.fail(c.closedError())
			}
		}
		for _, c := range t.conns {
			if c != nil {
				c.link.wait()
			}
		}
	})
	return nil
}
