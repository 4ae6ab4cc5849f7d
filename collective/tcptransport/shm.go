package tcptransport

import (
	"fmt"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// offerShm decides which links of socks (indexed by peer) may carry their
// frames in shared memory, those whose lanes have both formed to a peer
// whose address has this rank's host part, and runs package shm's
// handshake on them over their authenticated lanes (inside TLS with
// Config.TLS); capacity sizes the ring this rank offers each (see
// shm.Budget). Links to other hosts exchange nothing. The result is
// indexed by peer, nil for a link on TCP; every link stays on TCP under
// Config.NoSharedMemory.
func (t *transport) offerShm(socks []lanes, capacity func(peer int) int) []*shm.Rings {
	rings := make([]*shm.Rings, len(socks))
	if t.cfg.NoSharedMemory {
		return rings
	}
	var peers []shm.Peer
	self := hostOf(t.addrs[t.rank])
	for peer, l := range socks {
		if l.complete() && hostOf(t.addrs[peer]) == self {
			peers = append(peers, shm.Peer{Rank: peer, Out: l[laneOut], In: l[laneIn]})
		}
	}
	if len(peers) == 0 {
		return rings
	}
	setup := shm.Setup{Proc: t.tun.procDir, Deadline: time.Now().Add(t.cfg.HandshakeTimeout),
		Capacity: capacity, Logger: t.cfg.Logger}
	for i, r := range shm.Handshake(setup, peers) {
		rings[peers[i].Rank] = r
	}
	return rings
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
