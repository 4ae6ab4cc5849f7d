package tcptransport

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// inbound reads the byte stream of one receiving lane. A read buffer in
// front of the socket lets one syscall fetch a header together with a small
// payload (or the next header); reads at least as large as the buffer go
// straight into the caller's slice.
//
// A read asked to poll first busy-polls the non-blocking socket for up to
// the spin budget and only then parks on the netpoller. Parking costs a
// sleep and a wake-up of the thread (and, on an idle virtual CPU, of the
// CPU itself), which for a small message is several times the time the
// message takes to arrive.
type inbound struct {
	nc   *net.TCPConn
	rc   syscall.RawConn // nc's fd, for polling; nil disables polling
	buf  []byte          // the read buffer; empty for none
	r, w int             // buf[r:w] is read from the socket, not yet consumed
	spin time.Duration   // polling budget of one read; 0: never poll

	// The poll in progress, shared with pollOnce.
	pollFn   func(fd uintptr) bool // in.pollOnce, bound once: no allocation per poll
	pollInto []byte
	pollN    int
	pollErr  error
}

func newInbound(nc *net.TCPConn, bufSize int, spin time.Duration) *inbound {
	in := &inbound{nc: nc}
	if bufSize > 0 {
		in.buf = make([]byte, bufSize)
	}
	if spin > 0 {
		if rc, err := nc.SyscallConn(); err == nil {
			in.rc, in.spin = rc, spin
		}
	}
	in.pollFn = in.pollOnce
	return in
}

// readFull fills p, from the buffer first, then from the socket. poll says
// whether socket reads may busy-poll.
func (in *inbound) readFull(p []byte, poll bool) error {
	n := copy(p, in.buf[in.r:in.w])
	in.r += n
	p = p[n:]
	for len(p) > 0 { // the buffer is empty here
		if len(p) >= len(in.buf) {
			n, err := in.read(p, poll)
			p = p[n:]
			if err != nil {
				return noEOF(err, len(p))
			}
			continue
		}
		n, err := in.read(in.buf, poll)
		m := copy(p, in.buf[:n])
		in.r, in.w = m, n
		p = p[m:]
		if err != nil {
			return noEOF(err, len(p))
		}
	}
	return nil
}

// noEOF turns an end of stream inside a read into io.ErrUnexpectedEOF.
func noEOF(err error, left int) error {
	if err == io.EOF && left > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// read reads some bytes into p, polling first if poll is set and a budget
// is configured.
func (in *inbound) read(p []byte, poll bool) (int, error) {
	if poll && in.spin > 0 {
		if n, done, err := in.poll(p); done {
			return n, err
		}
	}
	return in.nc.Read(p)
}

// poll retries a non-blocking read of p until it returns data, an error or
// end of stream (done), or until the spin budget is spent (not done). A
// closed socket ends it at once, so Close and a cancelled context (which
// closes the socket) are honoured within one iteration. Between attempts
// it yields the processor, so polling never holds up a goroutine that can
// run, such as a peer rank in the same process.
func (in *inbound) poll(p []byte) (n int, done bool, err error) {
	in.pollInto = p
	n, done, err = in.spinRead()
	in.pollInto = nil // do not keep the caller's buffer reachable
	return n, done, err
}

func (in *inbound) spinRead() (int, bool, error) {
	var start time.Time
	for i := 0; ; i++ {
		if err := in.rc.Read(in.pollFn); err != nil {
			return 0, true, err
		}
		switch in.pollErr {
		case nil:
			if in.pollN == 0 {
				return 0, true, io.EOF
			}
			return in.pollN, true, nil
		case syscall.EAGAIN, syscall.EINTR:
		default:
			return 0, true, os.NewSyscallError("read", in.pollErr)
		}
		if i == 0 {
			start = time.Now()
		} else if time.Since(start) >= in.spin {
			return 0, false, nil
		}
		runtime.Gosched()
	}
}

// pollOnce is the RawConn callback: one non-blocking read, never a wait.
func (in *inbound) pollOnce(fd uintptr) bool {
	in.pollN, in.pollErr = syscall.Read(int(fd), in.pollInto)
	return true
}
