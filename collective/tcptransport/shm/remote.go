package shm

import (
	"encoding/binary"
	"io"
	"runtime"
	"unsafe"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// RemoteMinEnv names the environment variable that turns remote frames
// on: the least payload, in bytes, that SendWait sends as one (the
// receiver copies it once, straight from the sender's memory, instead of
// the sender copying it into the ring and the receiver out). They are off
// by default: on the 2-CPU test VM (a Firecracker guest) process_vm_readv
// copied 8-10 GB/s against memcpy's 21-25, and all-reduces of 4 to 64 MiB
// ran slower with remote frames of 256 KiB and up than through the rings:
// busbw 3.0-3.5 against 3.4-4.3 GB/s at 16 MiB with 2 ranks, 1.2-1.5
// against 1.6-1.8 with 4 (alternating launches of allreduce_bench).
// Hosts whose kernel copies between processes at memcpy's speed may
// differ; the variable is there to measure them. Set it at least to
// RemoteFloor.
const RemoteMinEnv = "GOROVOD_SHM_REMOTE_MIN"

// RemoteFloor is the least payload SendWait leaves in the sender's memory
// whatever the setting: a goroutine's stack, which moves, never holds a
// buffer this large (see SendWait).
const RemoteFloor = 256 << 10

// descSize is the bytes that follow the header of a remote frame in the
// ring: the payload's address in the sender's memory and the frame's id
// (little-endian uint64s).
const descSize = 16

// SendWait sends p as Send does, except that a payload of at least the
// link's remote minimum (see SetRemote) stays where it is: the frame
// carries its address, the receiver copies it from this process's memory
// (process_vm_readv(2)), and SendWait returns once it has (or once the
// link failed, the frame withdrawn so that the receiver uses nothing it
// copied). A receiver that may not read this process's memory refuses
// the first such frame; SendWait then sends that payload through the ring
// and sends no more remote frames.
//
// p must be memory that does not move while SendWait runs: Go's heap does
// not move objects, and a goroutine stack, which does, never holds a
// buffer this large (the compiler puts no variable over 128 KiB there;
// RemoteFloor is above that). SendWait keeps p alive until it returns.
//
// Remote frames never leave the host and carry no payload through any
// socket, so under TLS they need no encryption: the handshake that set up
// the rings, and with them the peer's pid, ran inside TLS.
func (l *Link) SendWait(tag collective.Tag, p []byte) error {
	if !l.SendsInPlace(len(p)) {
		return l.Send(tag, p)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.Err()
	}
	l.remoteID++
	id := l.remoteID
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p)), Remote: true})
	binary.LittleEndian.PutUint64(l.wdesc[0:8], uint64(uintptr(unsafe.Pointer(&p[0]))))
	binary.LittleEndian.PutUint64(l.wdesc[8:16], id)
	l.out.Post(id)
	l.wparts = append(l.wparts[:0], l.whdr[:], l.wdesc[:])
	err := l.out.WriteVec(l.wparts, l.poll, l.sendStopped)
	clear(l.wparts)
	var how shmring.Outcome
	if err == nil {
		how, err = l.out.AwaitTaken(id, l.poll, l.sendStopped)
	} else {
		l.out.Withdraw(id)
	}
	if err == nil && how == shmring.Refused {
		l.remoteMin = 0
		err = l.out.Write(p, l.poll, l.sendStopped)
	}
	runtime.KeepAlive(p) // the receiver read it from this process's memory until now
	return err
}

// RemoteReads returns how many payloads this side has copied straight
// from the sender's memory so far (a diagnostic, and what tests check).
func (l *Link) RemoteReads() int64 { return l.remoteIn.Load() }

// readRemote copies the payload of the remote frame whose header and
// address were just read into parts, from the sender's memory. It returns
// shmring.ErrRefused when this process may not read it (the sender then
// sends the payload through the ring), and fails the conn when the sender
// has gone or withdrew the frame.
func (l *Link) readRemote(parts [][]byte) error {
	addr := uintptr(binary.LittleEndian.Uint64(l.rdesc[0:8]))
	id := binary.LittleEndian.Uint64(l.rdesc[8:16])
	var err error
	if l.refuse {
		err = l.in.Refuse(id)
	} else {
		err = l.in.ReadRemote(parts, addr, id)
	}
	switch err {
	case nil:
		l.remoteIn.Add(1)
		return nil
	case shmring.ErrRefused:
		l.refusedAt.Do(func() {
			if l.log != nil {
				l.log.Debug("tcptransport: cannot read a same-host peer's memory (process_vm_readv), its large messages come through the ring")
			}
		})
		return err
	case shmring.ErrGone, shmring.ErrWithdrawn:
		return l.c.Gone(Receiving, io.ErrUnexpectedEOF)
	default:
		return l.c.Gone(Receiving, err)
	}
}
