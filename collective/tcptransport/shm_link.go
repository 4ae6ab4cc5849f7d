package tcptransport

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// shmLink is the shared-memory data path of a link between two ranks on one
// host: a ring per direction. The link's sockets stay open, idle, as its
// liveness signal: a peer that exits or crashes closes them, and a watcher
// blocked reading the inbound one fails the link (see watch).
type shmLink struct {
	out, in *ring
	mu      sync.RWMutex // held shared by a call using the rings, exclusively to unmap them
	mapped  bool
	gone    atomic.Bool   // the peer closed its end; what it wrote may still be unread
	failed  chan struct{} // closed when the link fails (see conn.fail)
	done    chan struct{} // closed when the watcher has unmapped the rings
}

// newShmLink pairs a ring this rank writes with one it reads.
func newShmLink(out, in *ring) *shmLink {
	return &shmLink{out: out, in: in, mapped: true, failed: make(chan struct{}), done: make(chan struct{})}
}

// watch blocks reading the link's idle inbound socket. The read ends when
// the peer closes its end (it exited, crashed or closed its transport) or
// when this side fails the link (which closes the sockets). A peer that
// went away may have left frames in the inbound ring, which Recv still
// delivers, as TCP would; the link fails when a call finds nothing more
// (or on Close). Once it has failed and no call uses the rings, they are
// unmapped.
func (c *conn) watch() {
	l := c.shm
	var b [1]byte
	n, _ := c.in.Read(b[:])
	switch {
	case n > 0:
		c.protocolFail("unexpected bytes on the idle socket of a shared-memory link")
	case c.failed.Load() == nil:
		l.gone.Store(true)
		l.wake()
		<-l.failed
	}
	l.wake()
	l.mu.Lock()
	l.out.unmap()
	l.in.unmap()
	l.mapped = false
	l.mu.Unlock()
	close(l.done)
}

// wake rouses every call of this process sleeping on the link's rings.
func (l *shmLink) wake() {
	futex(l.in.u32(offWseq), futexWake, 1<<30)
	futex(l.out.u32(offRseq), futexWake, 1<<30)
}

// shmSend writes one frame (header, then payload) into the outbound ring.
func (c *conn) shmSend(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.ready(ctx, opSend); err != nil {
		return err
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	l := c.shm
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the link failed
		return c.failed.Load().err
	}
	putHeader(&c.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	if err := l.out.write(c.whdr[:], c.sendStopped); err != nil {
		return err
	}
	return l.out.write(p, c.sendStopped)
}

// shmRecv reads one frame from the inbound ring, checking its header
// against tag and len(p) as Recv does.
func (c *conn) shmRecv(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.ready(ctx, opRecv); err != nil {
		return err
	}
	c.recvWatch.begin(ctx)
	defer c.recvWatch.end()
	l := c.shm
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the link failed
		return c.failed.Load().err
	}
	if err := c.shmRead(c.rhdr[:]); err != nil {
		return err
	}
	if err := c.checkHeader(tag, len(p)); err != nil {
		return err
	}
	return c.shmRead(p)
}

// shmYield is how long a shared-memory Recv polls with sched_yield(2)
// before it sleeps, when ranks outnumber this host's processors.
const shmYield = 50 * time.Microsecond

// shmRead fills p from the inbound ring. Whatever the frame's size, it
// polls before it sleeps in futex(2), unlike a socket Recv (see pollMax):
//
//   - when this host has a processor per rank (c.r.spin > 0), busy, for
//     the spin budget. Two ranks on the 2-CPU test VM ran a 1 MiB
//     all-reduce in 61 µs this way, against 236-281 µs polling only small
//     frames as sockets do (futex wake-ups are slow there) and 161 µs
//     over TCP;
//   - otherwise for shmYield, giving the processor to other processes
//     between looks, since the peer that will write may be waiting for
//     it. Four ranks on that VM, alternating launches: 4 KiB all-reduce
//     25-34 µs against 44-48 µs sleeping at once; 1 MiB 491-580 µs
//     polling every size against 714-822 µs polling only small frames.
//
// When the peer has gone and left too little, the link fails with
// collective.ErrPeerGone.
func (c *conn) shmRead(p []byte) error {
	spin, yield := c.r.spin, false
	if spin <= 0 {
		spin, yield = shmYield, true
	}
	err := c.shm.in.read(p, spin, yield, c.shm.gone.Load, c.stopped)
	if err == errRingGone {
		return c.ioFail(opRecv, io.EOF)
	}
	return err
}

// stopped is the ring's question after each sleep: has the link failed?
func (c *conn) stopped() error {
	if f := c.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// sendStopped is stopped for the sender, which also stops when the peer
// has gone: nobody will make room.
func (c *conn) sendStopped() error {
	if err := c.stopped(); err != nil {
		return err
	}
	if c.shm.gone.Load() {
		return c.ioFail(opSend, io.ErrClosedPipe)
	}
	return nil
}
