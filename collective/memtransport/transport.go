package memtransport

import (
	"fmt"

	"github.com/gorovod/gorovod/collective"
)

// transport is one rank's end of every link of a Network.
type transport struct {
	net   *Network
	rank  int
	conns []collective.Conn // indexed by peer
}

func newTransport(n *Network, rank int) *transport {
	t := &transport{net: n, rank: rank, conns: make([]collective.Conn, n.size)}
	for p := range n.size {
		if p == rank {
			t.conns[p] = badConn{errInvalidPeer(rank, p, n.size)}
			continue
		}
		l := n.links[rank][p]
		t.conns[p] = &conn{net: n, l: l, side: l.side(rank), rank: rank, peer: p}
	}
	return t
}

func (t *transport) Rank() int { return t.rank }
func (t *transport) Size() int { return t.net.size }

// Conn returns the link to peer; for a peer that does not exist, a Conn
// whose every call fails with collective.ErrInvalid.
func (t *transport) Conn(peer int) collective.Conn {
	if peer < 0 || peer >= len(t.conns) {
		return badConn{errInvalidPeer(t.rank, peer, t.net.size)}
	}
	return t.conns[peer]
}

// Host returns "mem:<peer>".
func (t *transport) Host(peer int) string { return fmt.Sprintf("mem:%d", peer) }

// Close fails every link end of this rank with ErrClosed, replacing any
// earlier cause, and tells each peer this rank is gone. It returns nil,
// however often it is called.
func (t *transport) Close() error {
	err := errClosed(t.rank)
	for p, l := range t.net.links[t.rank] {
		if p == t.rank {
			continue
		}
		l.mu.Lock()
		l.setErrLocked(l.side(t.rank), err)
		l.mu.Unlock()
	}
	return nil
}
