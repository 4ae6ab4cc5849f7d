package memtransport

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// An Option configures a Network.
type Option func(*Network)

// FailAfter breaks the link that carries the n-th message sent on the
// network (counting from 1 over all links, in the order Sends happen): that
// Send fails with collective.ErrPeerGone, and so does every later call on
// either end of the link. The link is always one in use, which makes this
// the hook for "a peer vanishes mid-operation". n < 1 means never.
func FailAfter(n int) Option {
	return func(net *Network) { net.failAt = int64(max(n, 0)) }
}

// RandomFault is FailAfter(k) with k drawn from [1, within] by a generator
// seeded with seed: the same seed always picks the same k. Which link that
// message travels on depends on the order of concurrent Sends.
func RandomFault(seed uint64, within int) Option {
	r := rand.New(rand.NewPCG(seed, 0))
	return FailAfter(1 + r.IntN(max(within, 1)))
}

// BreakLink fails the link between ranks a and b at once, in both
// directions: pending and later calls on either end return
// collective.ErrPeerGone, and queued messages are lost.
func (n *Network) BreakLink(a, b int) error {
	l, err := n.link(a, b)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.breakLocked()
	return nil
}

// DropPeer breaks every link of rank r, as if its process died: its own
// pending and later calls fail too, all with collective.ErrPeerGone.
func (n *Network) DropPeer(r int) error {
	if r < 0 || r >= n.size {
		return fmt.Errorf("memtransport: DropPeer(%d) with %d ranks: %w", r, n.size, collective.ErrInvalid)
	}
	for p, l := range n.links[r] {
		if p != r {
			l.mu.Lock()
			l.breakLocked()
			l.mu.Unlock()
		}
	}
	return nil
}

// SetDelay makes messages sent from a to b from now on arrive d later than
// they are sent (d <= 0: at once). Messages never overtake each other, so a
// message sent after a slow one waits for it.
func (n *Network) SetDelay(a, b int, d time.Duration) error {
	l, err := n.link(a, b)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends[l.side(b)].delay = max(d, 0)
	return nil
}

// link returns the link between a and b, which must be distinct ranks.
func (n *Network) link(a, b int) (*link, error) {
	if a < 0 || a >= n.size || b < 0 || b >= n.size || a == b {
		return nil, fmt.Errorf("memtransport: no link %d-%d with %d ranks: %w", a, b, n.size, collective.ErrInvalid)
	}
	return n.links[a][b], nil
}
