package tcptransport

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// inbound reads the byte stream of one receiving lane.
//
// Every read is one readv of two pieces: first the rest of what the caller
// wants, then a read buffer that takes whatever the stream holds beyond it
// (the next header, a whole small frame). So a frame whose header came with
// the previous read costs one syscall, and a small payload lands in the
// caller's slice with no copy; only bytes that overshoot into the buffer
// are copied, once, when their frame is read.
//
// A read asked to poll first busy-polls the non-blocking socket for up to
// the spin budget and only then parks on the netpoller. Parking costs a
// sleep and a wake-up of the thread (and, on an idle virtual CPU, of the
// CPU itself), which for a small message is several times the time the
// message takes to arrive. A poll that runs out of budget does not stop
// the next one from polling (see doc.go for why).
type inbound struct {
	rc   syscall.RawConn
	buf  []byte        // the read buffer; empty for none
	r, w int           // buf[r:w] is read from the socket, not yet consumed
	spin time.Duration // polling budget of one read; 0: never poll
	nap  time.Duration // how long a read sleeps in a raw ppoll before it parks (see tcpNap)
	// raw makes the non-blocking readv (and the link's writev) raw system
	// calls, which the Go scheduler does not see (see tuning.rawIO).
	raw bool
	// share is the least time between two looks of a poll that let the
	// process's other goroutines run (see shmring.ShareEvery).
	share time.Duration

	// The read in progress, shared with the RawConn callbacks, which are
	// bound once so that reads do not allocate.
	iov      [2]syscall.Iovec
	niov     int
	n        int   // bytes the last readv returned
	errno    error // its error; nil for data or end of stream
	pollFn   func(fd uintptr) bool
	parkFn   func(fd uintptr) bool
	napInFn  func(fd uintptr)
	napFor   time.Duration // the nap in progress (see napIn)
	rcFailed error         // set if the socket could not be reached
}

// newInbound reads nc through a read buffer of bufSize bytes (none if not
// positive), letting reads that may poll do so for spin and then sleep in
// a raw ppoll for nap before they park; raw makes its system calls raw
// (see tuning.rawIO).
func newInbound(nc *net.TCPConn, bufSize int, spin, nap time.Duration, raw bool) *inbound {
	in := &inbound{spin: spin, nap: nap, raw: raw, share: shmring.ShareEvery()}
	if bufSize > 0 {
		in.buf = make([]byte, bufSize)
	}
	in.rc, in.rcFailed = nc.SyscallConn()
	in.pollFn = in.pollOnce
	in.parkFn = in.readOrPark
	in.napInFn = in.napInOnce
	return in
}

// buffered reports whether the read buffer holds bytes not yet consumed.
func (in *inbound) buffered() bool { return in.r < in.w }

// readFull fills p, from the buffer first, then from the socket. poll says
// whether socket reads may busy-poll.
func (in *inbound) readFull(p []byte, poll bool) error {
	n := copy(p, in.buf[in.r:in.w])
	in.r += n
	p = p[n:]
	for len(p) > 0 { // the buffer is empty here
		n, err := in.read(p, poll && in.spin > 0)
		got := min(n, len(p))
		p = p[got:]
		in.r, in.w = 0, n-got
		if err != nil {
			if err == io.EOF && len(p) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// read reads at least one byte into p and the buffer behind it, polling
// first if poll is set. It returns the bytes read, which fill p before the
// buffer.
func (in *inbound) read(p []byte, poll bool) (int, error) {
	if in.rcFailed != nil {
		return 0, in.rcFailed
	}
	in.iov[0] = iovec(p)
	in.niov = 1
	if len(in.buf) > 0 {
		in.iov[1] = iovec(in.buf)
		in.niov = 2
	}
	defer in.release()
	if poll {
		if done, err := in.poll(); done {
			return in.n, err
		}
	}
	if naps(in.nap) {
		in.napIn(in.nap)
	}
	if err := in.rc.Read(in.parkFn); err != nil {
		return 0, err
	}
	return in.n, in.result()
}

// release drops the references to the caller's slice.
func (in *inbound) release() { in.iov[0] = syscall.Iovec{} }

// poll retries a non-blocking read until it returns data, an error or end
// of stream (done), or until the spin budget is spent (not done). A closed
// socket ends it at once, so Close and a cancelled context (which closes
// the socket) are honoured within one attempt. Between attempts it yields
// the processor, so polling never holds up a goroutine that can run, such
// as a peer rank in the same process.
func (in *inbound) poll() (done bool, err error) {
	var start, shared time.Time
	for i := 0; ; i++ {
		if err := in.rc.Read(in.pollFn); err != nil {
			return true, err
		}
		if in.errno != syscall.EAGAIN {
			return true, in.result()
		}
		now := time.Now()
		if i == 0 {
			start = now
		} else if now.Sub(start) >= in.spin {
			return false, nil
		}
		shmring.ShareTurn(in.share, &shared, now)
	}
}

// result turns the outcome of the last readv into an error.
func (in *inbound) result() error {
	switch {
	case in.errno != nil:
		return os.NewSyscallError("readv", in.errno)
	case in.n == 0:
		return io.EOF
	}
	return nil
}

// pollOnce is the RawConn callback of a poll: one non-blocking readv,
// never a wait.
func (in *inbound) pollOnce(fd uintptr) bool {
	in.readv(fd)
	return true
}

// readOrPark is the RawConn callback of a blocking read: it asks the
// netpoller to wait while the socket has nothing.
func (in *inbound) readOrPark(fd uintptr) bool {
	in.readv(fd)
	return in.errno != syscall.EAGAIN
}

// readv runs one readv(2) of the pieces in in.iov, retrying on EINTR.
func (in *inbound) readv(fd uintptr) {
	in.n, in.errno = vectorIO(syscall.SYS_READV, fd, &in.iov[0], in.niov, in.raw)
}

// vectorIO runs the readv(2) or writev(2) trap on fd with the n pieces
// from iov, retrying on EINTR: the bytes moved, or 0 and the errno
// (EAGAIN when a non-blocking socket has nothing or no room). raw runs it
// as a raw system call (see tuning.rawIO).
func vectorIO(trap, fd uintptr, iov *syscall.Iovec, n int, raw bool) (int, error) {
	for {
		var r uintptr
		var e syscall.Errno
		if raw {
			r, _, e = syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(iov)), uintptr(n))
		} else {
			r, _, e = syscall.Syscall(trap, fd, uintptr(unsafe.Pointer(iov)), uintptr(n))
		}
		switch e {
		case 0:
			return int(r), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}

// iovec describes p, which must not be empty.
func iovec(p []byte) syscall.Iovec {
	v := syscall.Iovec{Base: &p[0]}
	v.SetLen(len(p))
	return v
}
