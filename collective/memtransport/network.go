package memtransport

import (
	"sync/atomic"

	"github.com/gorovod/gorovod/collective"
)

// Network is a full mesh of in-memory links between size ranks. Its methods
// are safe for concurrent use.
type Network struct {
	size   int
	links  [][]*link // links[a][b] == links[b][a]; nil where a == b
	trans  []*transport
	sent   atomic.Int64 // messages accepted so far, counted for failAt
	failAt int64        // the message whose Send breaks its link; 0: none
}

// NewNetwork returns a network of size ranks (none if size < 1) with every
// link open.
func NewNetwork(size int, opts ...Option) *Network {
	size = max(size, 0)
	n := &Network{size: size, links: make([][]*link, size)}
	for _, opt := range opts {
		opt(n)
	}
	for a := range size {
		n.links[a] = make([]*link, size)
		for b := range a {
			l := newLink(b, a)
			n.links[a][b], n.links[b][a] = l, l
		}
	}
	for r := range size {
		n.trans = append(n.trans, newTransport(n, r))
	}
	return n
}

// Size returns the number of ranks.
func (n *Network) Size() int { return n.size }

// Transport returns rank's end of the mesh, or nil if rank is out of range.
func (n *Network) Transport(rank int) collective.Transport {
	if rank < 0 || rank >= n.size {
		return nil
	}
	return n.trans[rank]
}

// Transports returns every rank's transport, indexed by rank.
func (n *Network) Transports() []collective.Transport {
	ts := make([]collective.Transport, n.size)
	for r, t := range n.trans {
		ts[r] = t
	}
	return ts
}

// Close closes every rank's transport. It always returns nil.
func (n *Network) Close() error {
	for _, t := range n.trans {
		t.Close()
	}
	return nil
}

// faultNow counts one message and reports whether it is the one whose link
// must break.
func (n *Network) faultNow() bool {
	return n.sent.Add(1) == n.failAt
}
