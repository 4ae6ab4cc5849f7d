package tcptransport

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// offerShm decides which links of socks (indexed by peer) may carry their
// frames in shared memory, those whose lanes have both formed to a peer
// whose address has this rank's host part, and runs package shm's
// handshake on them over their authenticated lanes (inside TLS with
// Config.TLS); capacity sizes the ring this rank offers each (see
// shm.Budget), and proc stands in for "/proc" (see tuning.procDir). Links
// to other hosts exchange nothing. The result is indexed by peer, nil for
// a link on TCP; every link stays on TCP under Config.NoSharedMemory.
// broken, indexed by peer too, holds the error of each link whose
// handshake could not finish, which must be failed (see shm.Handshake).
func offerShm(cfg Config, proc string, socks []lanes, capacity func(peer int) int) (rings []*shm.Rings, broken []error) {
	rings, broken = make([]*shm.Rings, len(socks)), make([]error, len(socks))
	if cfg.NoSharedMemory {
		return rings, broken
	}
	var peers []shm.Peer
	self := hostOf(cfg.Addrs[cfg.Rank])
	for peer, l := range socks {
		if l.complete() && hostOf(cfg.Addrs[peer]) == self {
			peers = append(peers, shm.Peer{Rank: peer, Out: l[laneOut], In: l[laneIn]})
		}
	}
	if len(peers) == 0 {
		return rings, broken
	}
	setup := shm.Setup{Proc: proc, Deadline: time.Now().Add(cfg.HandshakeTimeout),
		Capacity: capacity, Logger: cfg.Logger}
	rs, errs := shm.Handshake(setup, peers)
	for i, r := range rs {
		rings[peers[i].Rank], broken[peers[i].Rank] = r, errs[i]
	}
	return rings, broken
}

// failBroken fails c, whose shared-memory handshake could not finish
// (err, from offerShm), before it carries any frame: its streams are at an
// unknown place in the handshake. A handshake that ran out of time
// (Config.HandshakeTimeout) wraps collective.ErrTimeout, any other
// failure collective.ErrPeerGone.
func failBroken(c *conn, err error) {
	kind := collective.ErrPeerGone
	if errors.Is(err, os.ErrDeadlineExceeded) {
		kind = collective.ErrTimeout
	}
	c.fail(fmt.Errorf("%s: %w: %w", c.where(opLink), kind, err))
}

// SharedMemoryCheck reports whether this process can make the
// shared-memory ring that a link between two ranks on one host offers its
// peer (see the package documentation and shm.Check). A nil error means
// that a rank of this process's kind, on this host, can offer rings;
// whether its peer can open them (same user, same pid namespace) only the
// link's own handshake finds out. An error says why not: the links of such
// a rank to ranks on its own host would stay on TCP, as they do under
// Config.NoSharedMemory.
func SharedMemoryCheck() error {
	if err := shm.Check(); err != nil {
		return fmt.Errorf("tcptransport: shared memory: %w", err)
	}
	return nil
}
