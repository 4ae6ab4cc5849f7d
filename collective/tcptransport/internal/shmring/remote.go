package shmring

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A ring can also carry a message without copying it in: its writer posts
// where the message lies in the writer's memory (see Post), and its reader
// copies it from there straight into its own buffer with
// process_vm_readv(2) (ReadRemote), then says it is done; the writer waits
// for that before its buffer may change (AwaitTaken). The two meet on a
// state word in the file's first page, which only moves forward for each
// message, by compare-and-swap, so that exactly one of "taken", "refused"
// (the reader could not read: no permission, no such system call) and
// "withdrawn" (the writer gave up waiting; its buffer may already change)
// wins. How the reader learns the address and the message's number is the
// caller's business (the ring carries it like any bytes).
//
// Layout of the words, after the others (see ring.go):
//
//	320  remote        the state of the last posted message (uint64):
//	                   its number << 2 | one of the states below
//	384  remoteSeq     bumped after every change of remote by the reader
//	388  remoteWaiting 1 while the writer sleeps on remoteSeq
const (
	offRemote, offRemoteSeq, offRemoteWaiting = 320, 384, 388
)

// States of a posted message.
const (
	statePosted    = 1 // the writer waits; its buffer holds the message
	stateTaken     = 2 // the reader has copied it
	stateRefused   = 3 // the reader could not; the writer sends it as bytes
	stateWithdrawn = 0 // the writer gave up; the reader must not use what it read
)

// Errors of ReadRemote.
var (
	// ErrRefused says this process cannot read the writer's memory
	// (process_vm_readv(2) failed for want of permission or support): the
	// writer has been told, and sends the message through the ring
	// instead.
	ErrRefused = errors.New("shmring: reading the writer's memory refused")
	// ErrWithdrawn says the writer gave up on the message (its side
	// failed) before the reader was done: what was read may be torn.
	ErrWithdrawn = errors.New("shmring: writer withdrew the message")
)

// Outcome is how the reader answered a posted message.
type Outcome int

// The outcomes of AwaitTaken.
const (
	Taken   Outcome = iota // the reader copied the message
	Refused                // the reader could not: send it through the ring
)

// Post tells the reader (through the state word) that message id lies in
// this process's memory, waiting for it; the writer then sends the reader
// its address and id through the ring. ids must grow; the writer's buffer
// must stay unchanged until AwaitTaken returns.
func (r *Ring) Post(id uint64) {
	atomic.StoreUint64(r.u64(offRemote), id<<2|statePosted)
}

// AwaitTaken waits until the reader has taken or refused message id,
// polling first as pl says, then sleeping as Write does and asking stop
// after every sleep. If stop reports an error before the reader has
// answered, the message is withdrawn (the reader will not use what it
// read) and the error returned; once AwaitTaken has returned the writer's
// buffer may change.
func (r *Ring) AwaitTaken(id uint64, pl Poll, stop func() error) (Outcome, error) {
	posted := id<<2 | statePosted
	state := r.u64(offRemote)
	if atomic.LoadUint64(state) == posted && pl.Spin > 0 {
		r.poll(offRemote, posted, pl, func() bool { return false }, stop)
	}
	for {
		switch atomic.LoadUint64(state) {
		case id<<2 | stateTaken:
			return Taken, nil
		case id<<2 | stateRefused:
			return Refused, nil
		}
		err := r.sleep(offRemoteSeq, offRemoteWaiting, func() bool { return atomic.LoadUint64(state) == posted }, stop)
		if err != nil {
			if atomic.CompareAndSwapUint64(state, posted, id<<2|stateWithdrawn) {
				return 0, err
			}
			continue // answered meanwhile: report that
		}
	}
}

// Withdraw withdraws message id, posted by this side, if the reader has not
// answered yet, for a writer that gives up before it could wait (its
// address never went out in full, or the link failed): a reader that
// already started copies nothing it will use.
func (r *Ring) Withdraw(id uint64) {
	atomic.CompareAndSwapUint64(r.u64(offRemote), id<<2|statePosted, id<<2|stateWithdrawn)
}

// WakeRemote rouses at once every AwaitTaken of this process sleeping on
// r, so that it asks its stop function again.
func (r *Ring) WakeRemote() { futex(r.u32(offRemoteSeq), futexWake, 1<<30) }

// ReadRemote fills the parts, in order, with message id that the writer
// posted at addr in its memory, and tells the writer it is done. The
// writer is the process that created the ring, known since Open by its
// pid and a pidfd of it. It returns ErrRefused (the writer was told, and
// sends the message through the ring instead) when this process may not
// read the writer's memory, ErrWithdrawn when the writer withdrew the
// message, and ErrGone when the writer has exited. After a successful
// copy it checks that the writer still has not been reaped (so the pid
// still named it throughout) and that the message was not withdrawn in
// the meantime (so it was not changed while being copied).
func (r *Ring) ReadRemote(parts [][]byte, addr uintptr, id uint64) error {
	posted := id<<2 | statePosted
	state := r.u64(offRemote)
	if atomic.LoadUint64(state) != posted {
		return ErrWithdrawn
	}
	err := r.copyRemote(parts, addr)
	switch {
	case err == nil && !r.alive():
		err = ErrGone
	case err == syscall.ESRCH:
		err = ErrGone
	case err == syscall.EFAULT:
		// The address is not mapped in the writer: it is exiting (or
		// wrote a bad address, which only a broken writer would).
		err = ErrGone
	case err != nil:
		if !atomic.CompareAndSwapUint64(state, posted, id<<2|stateRefused) {
			return ErrWithdrawn
		}
		r.signal(offRemoteSeq, offRemoteWaiting)
		return ErrRefused
	}
	if err != nil {
		return err
	}
	if !atomic.CompareAndSwapUint64(state, posted, id<<2|stateTaken) {
		return ErrWithdrawn
	}
	r.signal(offRemoteSeq, offRemoteWaiting)
	return nil
}

// copyRemote copies the writer's memory from addr into parts with
// process_vm_readv(2), which may copy less than asked (up to a page it
// cannot reach), in as many calls as that takes.
func (r *Ring) copyRemote(parts [][]byte, addr uintptr) error {
	if !haveRemote || r.pid <= 0 || r.pidfd < 0 {
		return syscall.ENOSYS
	}
	var local [8]syscall.Iovec
	i, off := 0, 0 // the next byte to fill: parts[i][off]
	for i < len(parts) {
		iov, n := local[:0], 0
		for j, o := i, off; j < len(parts) && len(iov) < len(local); j, o = j+1, 0 {
			if p := parts[j][o:]; len(p) > 0 {
				v := syscall.Iovec{Base: &p[0]}
				v.SetLen(len(p))
				iov = append(iov, v)
				n += len(p)
			}
		}
		if n == 0 {
			return nil
		}
		remote := remoteIovec{base: addr, len: uint64(n)}
		got, _, e := syscall.Syscall6(sysProcessVMReadv, uintptr(r.pid),
			uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)),
			uintptr(unsafe.Pointer(&remote)), 1, 0)
		runtime.KeepAlive(parts)
		if e != 0 {
			return e
		}
		if got == 0 {
			return syscall.EFAULT
		}
		addr += got
		for left := int(got); left > 0; {
			k := min(left, len(parts[i])-off)
			left, off = left-k, off+k
			if off == len(parts[i]) {
				i, off = i+1, 0
			}
		}
		for i < len(parts) && len(parts[i]) == 0 {
			i++
		}
	}
	return nil
}

// remoteIovec is a struct iovec of the writer's memory, whose address
// means nothing in this process (so it is no Go pointer). Rings exist only
// on 64-bit architectures (see memfd).
type remoteIovec struct {
	base uintptr
	len  uint64
}

// System calls on pidfds, numbered alike on every Linux architecture.
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// openWriter records the writer's pid and opens a pidfd of it
// (pidfd_open(2), Linux 5.3), by which ReadRemote checks that the pid has
// gone on naming the same process. Without one, ReadRemote refuses.
func (r *Ring) openWriter(pid int) {
	r.pid, r.pidfd = pid, -1
	if !haveRemote {
		return
	}
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e == 0 {
		r.pidfd = int(fd) // close-on-exec, as pidfd_open makes every pidfd
	}
}

// alive reports whether the writer has not been reaped yet: signal 0
// through its pidfd (pidfd_send_signal(2)) checks that without sending
// anything.
func (r *Ring) alive() bool {
	_, _, e := syscall.Syscall6(sysPidfdSendSignal, uintptr(r.pidfd), 0, 0, 0, 0, 0)
	return e == 0
}

// closeWriter closes the pidfd, if any.
func (r *Ring) closeWriter() {
	if r.pidfd >= 0 {
		syscall.Close(r.pidfd)
		r.pidfd = -1
	}
}

// Refuse answers message id as ReadRemote does when this process may not
// read the writer's memory, without trying: ErrRefused, or ErrWithdrawn
// when the writer withdrew it first.
func (r *Ring) Refuse(id uint64) error {
	if !atomic.CompareAndSwapUint64(r.u64(offRemote), id<<2|statePosted, id<<2|stateRefused) {
		return ErrWithdrawn
	}
	r.signal(offRemoteSeq, offRemoteWaiting)
	return ErrRefused
}
