package tcptransport

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// shmRings are the two rings of a same-host link that the shared-memory
// handshake set up (see offerShm): one this rank writes, one it reads.
type shmRings struct {
	out, in *shmring.Ring
}

// shmLink carries a conn's frames through a ring per direction in shared
// memory. The conn's sockets stay open, idle, as the link's liveness
// signal: a peer that exits or crashes closes them, and a watcher blocked
// reading the inbound one tells the link (see watch).
type shmLink struct {
	c       *conn
	out, in *shmring.Ring
	poll    shmring.Poll // how recv polls an empty ring before it sleeps

	mu     sync.RWMutex  // held shared by a call using the rings, exclusively to unmap them
	mapped bool          // the rings are mapped; false once the watcher unmapped them
	gone   atomic.Bool   // the peer closed its end; what it wrote may still be unread
	downed chan struct{} // closed when the conn fails (see down)
	done   chan struct{} // closed when the watcher has unmapped the rings

	_      [cacheLine]byte
	whdr   [headerSize]byte // touched only by the send in progress
	wparts [][]byte         // the send in progress: its header and payload
	_      [cacheLine]byte
	rhdr   [headerSize]byte // touched only by the recv in progress
}

// shmYield is how long a shared-memory recv polls with sched_yield(2)
// before it sleeps, when ranks outnumber this host's processors.
const shmYield = 50 * time.Microsecond

// newShmLink carries c's frames through rings. Whatever a frame's size,
// recv polls an empty ring before it sleeps in futex(2), unlike a socket
// recv (see pollMax):
//
//   - when this host has a processor to spare beyond one per rank (spin
//     > 0, see autoSpin), busy, for the spin budget. Two ranks on the
//     2-CPU test VM (before that rule needed the spare) ran a 1 MiB all-reduce
//     in 61 µs this way, against 236-281 µs polling only small frames as
//     sockets do (futex wake-ups are slow there) and 161 µs over TCP;
//   - otherwise for shmYield, giving the processor to other processes
//     between looks, since the peer that will write may be waiting for
//     it. Four ranks on that VM, alternating launches: 4 KiB all-reduce
//     25-34 µs against 44-48 µs sleeping at once; 1 MiB 491-580 µs
//     polling every size against 714-822 µs polling only small frames.
//
// The caller starts the link's watcher (go l.watch()).
func newShmLink(c *conn, rings shmRings, tun tuning) *shmLink {
	l := &shmLink{c: c, out: rings.out, in: rings.in, poll: shmring.Poll{Spin: tun.spin}, mapped: true,
		downed: make(chan struct{}), done: make(chan struct{})}
	if tun.spin <= 0 {
		l.poll = shmring.Poll{Spin: shmYield, Yield: true, Quick: tun.quick}
	}
	return l
}

// send writes one frame (header, then payload) into the outbound ring.
func (l *shmLink) send(tag collective.Tag, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the conn failed
		return l.c.failed.Load().err
	}
	putHeader(&l.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	l.wparts = append(l.wparts[:0], l.whdr[:], p)
	err := l.out.WriteVec(l.wparts, l.sendStopped)
	clear(l.wparts) // hold on to no caller's buffer
	return err
}

// sendVec writes one frame of the parts, copying each into the ring from
// where it lies.
func (l *shmLink) sendVec(tag collective.Tag, parts [][]byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.failed.Load().err
	}
	putHeader(&l.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(partsLen(parts))})
	l.wparts = append(append(l.wparts[:0], l.whdr[:]), parts...)
	err := l.out.WriteVec(l.wparts, l.sendStopped)
	clear(l.wparts)
	return err
}

// recvVec is recv into parts in order.
func (l *shmLink) recvVec(tag collective.Tag, parts [][]byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.failed.Load().err
	}
	if err := l.read(l.rhdr[:]); err != nil {
		return err
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, partsLen(parts)); err != nil {
		return err
	}
	for _, p := range parts {
		if err := l.read(p); err != nil {
			return err
		}
	}
	return nil
}

// recv reads one frame from the inbound ring, checking its header against
// tag and len(p) as a tcpLink does.
func (l *shmLink) recv(tag collective.Tag, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the conn failed
		return l.c.failed.Load().err
	}
	if err := l.read(l.rhdr[:]); err != nil {
		return err
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, len(p)); err != nil {
		return err
	}
	return l.read(p)
}

// read fills p from the inbound ring. When the peer has gone and left too
// little, the conn fails with collective.ErrPeerGone.
func (l *shmLink) read(p []byte) error {
	err := l.in.Read(p, l.poll, l.gone.Load, l.stopped)
	if err == shmring.ErrGone {
		return l.c.ioFail(opRecv, io.EOF)
	}
	return err
}

// stopped is the ring's question after each sleep: has the conn failed?
func (l *shmLink) stopped() error {
	if f := l.c.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// sendStopped is stopped for the sender, which also stops when the peer
// has gone: nobody will make room.
func (l *shmLink) sendStopped() error {
	if err := l.stopped(); err != nil {
		return err
	}
	if l.gone.Load() {
		return l.c.ioFail(opSend, io.ErrClosedPipe)
	}
	return nil
}

// down lets the watcher unmap the rings (see watch).
func (l *shmLink) down() { close(l.downed) }

// wait returns once the watcher has unmapped the rings and ended.
func (l *shmLink) wait() { <-l.done }
