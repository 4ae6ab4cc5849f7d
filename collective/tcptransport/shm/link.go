package shm

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// cacheLine is the size of a processor cache line. A Link keeps what its
// send writes and what its recv writes this far apart, so that a send and
// a recv running at once on two processors do not take the same line from
// each other on every frame.
const cacheLine = 64

// Rings are the two rings of a same-host link that the handshake set up
// (see Handshake): one this rank writes, one it reads.
type Rings struct {
	out, in *shmring.Ring
}

// Op is what a Link was doing when it found its peer gone.
type Op int

const (
	// Sending: a send found the peer gone.
	Sending Op = iota
	// Receiving: a recv found the peer gone and nothing more to read.
	Receiving
)

// Conn is the connection whose frames a Link carries: it holds the sticky
// failure that the Link reports to and stops on. Each method that fails
// the connection keeps the first cause and returns the cause recorded.
// Failing it closes its sockets and then calls the Link's Down.
type Conn interface {
	// Err returns the connection's failure; nil while it works.
	Err() error
	// Gone fails the connection: the peer went away during op (err says
	// how).
	Gone(op Op, err error) error
	// Corrupt fails the connection after a bad frame or a byte where none
	// belongs; msg says what was wrong.
	Corrupt(msg string) error
}

// Link carries a connection's frames (see package frame) through a ring
// per direction in shared memory. The connection's sockets stay open,
// idle, as the link's liveness signal: a peer that exits or crashes closes
// them, and a watcher blocked reading the inbound one tells the link (see
// Watch).
//
// As on a TCP link, at most one send and one recv run at a time, and they
// share nothing but the connection's failure.
type Link struct {
	c       Conn
	idle    io.Reader // the connection's inbound socket, idle but for its close
	out, in *shmring.Ring
	poll    shmring.Poll // how recv polls an empty ring before it sleeps

	mu     sync.RWMutex  // held shared by a call using the rings, exclusively to unmap them
	mapped bool          // the rings are mapped; false once the watcher unmapped them
	gone   atomic.Bool   // the peer closed its end; what it wrote may still be unread
	downed chan struct{} // closed when the conn fails (see Down)
	done   chan struct{} // closed when the watcher has unmapped the rings

	remoteIn  atomic.Int64 // payloads this side copied from the sender's memory
	log       *slog.Logger // receives the one Debug line of a refused remote read
	refuse    bool         // refuse every remote frame (tests of the fallback)
	refusedAt sync.Once    // logs the first refusal

	_         [cacheLine]byte
	whdr      [frame.HeaderSize]byte // touched only by the send in progress
	wdesc     [descSize]byte         // the remote frame in progress: its address and id
	wparts    [][]byte               // the send in progress: its header and payload
	remoteMin int                    // SendWait's least remote frame; 0: none (any more)
	remoteID  uint64                 // the last remote frame's id
	_         [cacheLine]byte
	rhdr      [frame.HeaderSize]byte // touched only by the recv in progress
	rdesc     [descSize]byte
	rparts    [][]byte
	rtmp      []byte       // a remote frame's payload, for RecvReduce
	fold      folder       // the RecvReduce in progress
	foldFn    func([]byte) // fold.add, made once
}

// yieldFor is how long a shared-memory recv polls with sched_yield(2)
// before it sleeps, when ranks outnumber this host's processors.
const yieldFor = 50 * time.Microsecond

// NewLink carries c's frames through rings; idle is c's inbound socket,
// which the watcher reads for the peer's close. Whatever a frame's size,
// recv polls an empty ring before it sleeps in futex(2), unlike a socket
// recv (which polls only small frames):
//
//   - when this host has a processor to spare beyond one per rank (spin
//     > 0), busy, for spin. Two ranks on the 2-CPU test VM (before that
//     rule needed the spare) ran a 1 MiB all-reduce in 61 µs this way,
//     against 236-281 µs polling only small frames as sockets do (futex
//     wake-ups are slow there) and 161 µs over TCP;
//   - otherwise for yieldFor, giving the processor to other processes
//     between looks (after quick of busy looks), since the peer that will
//     write may be waiting for it. Four ranks on that VM, alternating
//     launches: 4 KiB all-reduce 25-34 µs against 44-48 µs sleeping at
//     once; 1 MiB 491-580 µs polling every size against 714-822 µs polling
//     only small frames.
//
// The caller makes the Link c's data path and then starts its watcher (go
// l.Watch()).
func NewLink(c Conn, idle io.Reader, rings *Rings, spin, quick time.Duration) *Link {
	l := &Link{c: c, idle: idle, out: rings.out, in: rings.in, poll: shmring.Poll{Spin: spin}, mapped: true,
		downed: make(chan struct{}), done: make(chan struct{})}
	if spin <= 0 {
		l.poll = shmring.Poll{Spin: yieldFor, Yield: true, Quick: quick}
	}
	l.poll.Share = shmring.ShareEvery()
	l.foldFn = l.fold.add
	return l
}

// Send writes one frame (header, then payload) into the outbound ring.
func (l *Link) Send(tag collective.Tag, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the conn failed
		return l.c.Err()
	}
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	l.wparts = append(l.wparts[:0], l.whdr[:], p)
	err := l.out.WriteVec(l.wparts, l.poll, l.sendStopped)
	clear(l.wparts) // hold on to no caller's buffer
	return err
}

// SendVec writes one frame of the parts, copying each into the ring from
// where it lies.
func (l *Link) SendVec(tag collective.Tag, parts [][]byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.Err()
	}
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(frame.PartsLen(parts))})
	l.wparts = append(append(l.wparts[:0], l.whdr[:]), parts...)
	err := l.out.WriteVec(l.wparts, l.poll, l.sendStopped)
	clear(l.wparts)
	return err
}

// RecvVec is Recv into parts in order.
func (l *Link) RecvVec(tag collective.Tag, parts [][]byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.Err()
	}
	return l.recv(tag, parts)
}

// recv reads one frame into parts: the header, then the payload from the
// ring, or for a remote frame its address, then the payload from the
// sender's memory.
func (l *Link) recv(tag collective.Tag, parts [][]byte) error {
	if err := l.read(l.rhdr[:]); err != nil {
		return err
	}
	remote, err := frame.CheckAny(l.rhdr[:], tag, frame.PartsLen(parts))
	if err != nil {
		return l.c.Corrupt(err.Error())
	}
	if remote {
		if err := l.read(l.rdesc[:]); err != nil {
			return err
		}
		if err := l.readRemote(parts); err != shmring.ErrRefused {
			return err
		}
		// Refused: the sender sends the payload through the ring.
	}
	for _, p := range parts {
		if err := l.read(p); err != nil {
			return err
		}
	}
	return nil
}

// Recv reads one frame from the inbound ring, checking its header against
// tag and len(p) as a TCP link does.
func (l *Link) Recv(tag collective.Tag, p []byte) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped { // unmapped only after the conn failed
		return l.c.Err()
	}
	l.rparts = append(l.rparts[:0], p)
	err := l.recv(tag, l.rparts)
	clear(l.rparts) // hold on to no caller's buffer
	return err
}

// read fills p from the inbound ring. When the peer has gone and left too
// little, the conn fails with collective.ErrPeerGone.
func (l *Link) read(p []byte) error {
	err := l.in.Read(p, l.poll, l.gone.Load, l.stopped)
	if err == shmring.ErrGone {
		return l.c.Gone(Receiving, io.EOF)
	}
	return err
}

// stopped is the ring's question after each sleep: has the conn failed?
func (l *Link) stopped() error { return l.c.Err() }

// sendStopped is stopped for the sender, which also stops when the peer
// has gone: nobody will make room.
func (l *Link) sendStopped() error {
	if err := l.stopped(); err != nil {
		return err
	}
	if l.gone.Load() {
		return l.c.Gone(Sending, io.ErrClosedPipe)
	}
	return nil
}

// Buffered is what the link holds unreceived, in payload bytes of messages
// frames (see collective.Buffered): the capacity of this rank's outbound
// ring less the frames' headers.
func (l *Link) Buffered(messages int) int {
	return max(0, l.out.Capacity()-messages*frame.HeaderSize)
}

// Backlog is what this side has written to its outbound ring and the
// peer has not read yet, in bytes, frames' headers included (see
// collective.Backlogged); 0 once the rings are unmapped. Like Send, it is
// for the goroutine that sends.
func (l *Link) Backlog() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return 0
	}
	return l.out.Unread()
}

// Gone reports whether the watcher has seen the peer close its end; frames
// it wrote before may still be unread.
func (l *Link) Gone() bool { return l.gone.Load() }

// Down tells the link that its conn has failed for good and closed its
// sockets, so that the watcher unmaps the rings (see Watch). It is called
// once.
func (l *Link) Down() { close(l.downed) }

// Wait returns once the watcher has unmapped the rings and ended.
func (l *Link) Wait() { <-l.done }

// SendsInPlace reports whether SendWait would leave a payload of n bytes
// in this process's memory for the receiver to copy (see
// collective.InPlace). Like SendWait, it is for the goroutine that sends.
func (l *Link) SendsInPlace(n int) bool {
	return l.remoteMin > 0 && n >= max(l.remoteMin, RemoteFloor)
}

// SetRemote sets how the link moves large messages (see SendWait): min is
// the least payload that SendWait leaves in the sender's memory for the
// receiver to copy, 0 for none; refuse makes this side refuse to copy
// such frames, as a side without permission does (tests of the fallback);
// log receives the one Debug line that says a remote read was refused.
// It is called before the link carries any frame.
func (l *Link) SetRemote(min int, refuse bool, log *slog.Logger) {
	l.remoteMin, l.refuse, l.log = min, refuse, log
}
