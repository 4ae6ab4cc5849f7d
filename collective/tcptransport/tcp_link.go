package tcptransport

import (
	"net"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
)

// recvBuffer is the size of the read buffer behind each receiving socket:
// it takes what a read fetches beyond the bytes asked for, such as the next
// header or a whole small frame, which then costs no syscall (see inbound).
// Chosen by BenchmarkPingPong and BenchmarkStream (see bench_test.go).
const recvBuffer = 16 << 10

// pollMax is the largest payload whose Recv busy-polls before parking (see
// inbound). Larger messages take long enough on the wire that a wake-up is
// cheap in comparison, and the pipelined executor that moves them needs the
// processors for sending and reducing (polling up to 1 MiB measured no
// faster for 256 KiB to 64 MiB all-reduces).
const pollMax = 64 << 10

// tcpLink carries a conn's frames over its two sockets, one per direction.
// Send fields and recv fields are disjoint, so one of each may run at once
// without locks.
type tcpLink struct {
	c *conn

	// Send side, touched only by the send in progress.
	out  *net.TCPConn // lane rank>peer: written, never read
	whdr [frame.HeaderSize]byte
	wvec [2][]byte
	wbuf net.Buffers
	wvs  [][]byte // the header and parts of a SendVec, or of an Exchange's frame (from wvs[xk] still to write)

	// An Exchange's writes (see exchange.go): the socket's RawConn, the
	// first piece of wvs left to write and the bytes left, and the last
	// writev.
	wrc    syscall.RawConn
	wrcErr error // set if the socket could not be reached
	xk     int
	wleft  int
	wiov   []syscall.Iovec
	wn     int
	werrno error
	// writeOnce and writeOrPark, bound once so that writes do not allocate.
	writeFn, writeParkFn func(fd uintptr) bool
	// An Exchange's nap (see nap.go): its callbacks, bound once, and the
	// nap in progress: how long, the link whose receiving socket it also
	// watches, and this link's sending socket.
	napOutFn, napBothFn, napBothInFn func(fd uintptr)
	napFor                           time.Duration
	napFrom                          *tcpLink
	napWfd                           uintptr
	_                                [cacheLine]byte

	// Recv side, touched only by the recv in progress.
	rhdr [frame.HeaderSize]byte
	r    *inbound // lane peer>rank: read, never written

	sec *secureLanes // with TLS: the sessions the frames go through instead; nil on a plain link

	// largeLook is how long an Exchange larger than pollMax polls its
	// receiving socket before it sleeps (see exchangeOp.run and
	// tuning.largeLook); zero: not at all.
	largeLook time.Duration
}

// newTCPLink carries c's frames over its sockets, or over the TLS sessions
// on them (see secureLanes). readBuf > 0 puts a read buffer of that size
// in front of the receiving socket (see recvBuffer); spin > 0 lets small
// receives poll that long (see inbound); raw makes its readv and writev
// raw system calls (see tuning.rawIO).
func newTCPLink(c *conn, readBuf int, spin, nap time.Duration, raw bool) *tcpLink {
	if c.out.tls != nil {
		return &tcpLink{c: c, sec: newSecureLanes(c.out, c.in, spin)}
	}
	l := &tcpLink{c: c, out: c.out.tcp, r: newInbound(c.in.tcp, readBuf, spin, nap, raw)}
	l.wrc, l.wrcErr = l.out.SyscallConn()
	l.writeFn, l.writeParkFn = l.writeOnce, l.writeOrPark
	l.napOutFn, l.napBothFn, l.napBothInFn = l.napOutOnce, l.napBothOut, l.napBothIn
	return l
}

// Send writes one frame, header and payload in a single writev, without
// copying p (with TLS, see secureLanes.write).
func (l *tcpLink) Send(tag collective.Tag, p []byte) error {
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	l.wvec[0], l.wvec[1] = l.whdr[:], p
	var err error
	if l.sec != nil {
		err = l.sec.write(l.wvec[:])
	} else {
		l.wbuf = l.wvec[:]
		_, err = l.wbuf.WriteTo(l.out)
	}
	l.wvec[1] = nil // do not keep the caller's buffer reachable
	return l.sendResult(err)
}

// SendVec writes one frame of the parts in a single writev, without
// copying them.
func (l *tcpLink) SendVec(tag collective.Tag, parts [][]byte) error {
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(frame.PartsLen(parts))})
	l.wvs = append(append(l.wvs[:0], l.whdr[:]), parts...)
	var err error
	if l.sec != nil {
		err = l.sec.write(l.wvs)
	} else {
		l.wbuf = l.wvs
		_, err = l.wbuf.WriteTo(l.out)
	}
	clear(l.wvs) // do not keep the caller's buffers reachable
	return l.sendResult(err)
}

// sendResult fails the link on a send's error.
func (l *tcpLink) sendResult(err error) error {
	if err != nil {
		return l.c.ioFail(opSend, err)
	}
	return nil
}

// readFull fills p from the receiving lane: from the socket through the
// inbound buffer (poll as inbound.readFull), or from the TLS session.
func (l *tcpLink) readFull(p []byte, poll bool) error {
	if l.sec != nil {
		return l.sec.readFull(p, poll)
	}
	return l.r.readFull(p, poll)
}

// RecvVec is Recv into parts in order.
func (l *tcpLink) RecvVec(tag collective.Tag, parts [][]byte) error {
	n := frame.PartsLen(parts)
	poll := n <= pollMax
	if err := l.readFull(l.rhdr[:], poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, n); err != nil {
		return err
	}
	for _, p := range parts {
		if err := l.readFull(p, poll); err != nil {
			return l.c.ioFail(opRecv, err)
		}
	}
	return nil
}

// Recv reads one frame header, checks it against tag and len(p), then
// reads the payload into p. A Recv of a small frame busy-polls (see
// pollMax and inbound).
func (l *tcpLink) Recv(tag collective.Tag, p []byte) error {
	poll := len(p) <= pollMax
	if err := l.readFull(l.rhdr[:], poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, len(p)); err != nil {
		return err
	}
	if err := l.readFull(p, poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	return nil
}

// Down has nothing to do: closing the sockets ended every call.
func (*tcpLink) Down() {}

// Wait has nothing to wait for.
func (*tcpLink) Wait() {}
