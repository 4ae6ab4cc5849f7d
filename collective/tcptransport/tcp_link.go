package tcptransport

import (
	"net"
	"time"

	"github.com/gorovod/gorovod/collective"
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
	whdr [headerSize]byte
	wvec [2][]byte
	wbuf net.Buffers
	wvs  [][]byte // sendVec's header and parts
	_    [cacheLine]byte

	// Recv side, touched only by the recv in progress.
	rhdr [headerSize]byte
	r    *inbound // lane peer>rank: read, never written
}

// newTCPLink carries c's frames over its sockets. readBuf > 0 puts a read
// buffer of that size in front of the receiving socket (see recvBuffer);
// spin > 0 lets small receives poll that long (see inbound).
func newTCPLink(c *conn, readBuf int, spin time.Duration) *tcpLink {
	return &tcpLink{c: c, out: c.out, r: newInbound(c.in, readBuf, spin)}
}

// send writes one frame, header and payload in a single writev, without
// copying p.
func (l *tcpLink) send(tag collective.Tag, p []byte) error {
	putHeader(&l.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	l.wvec[0], l.wvec[1] = l.whdr[:], p
	l.wbuf = l.wvec[:]
	_, err := l.wbuf.WriteTo(l.out)
	l.wvec[1] = nil // do not keep the caller's buffer reachable
	if err != nil {
		return l.c.ioFail(opSend, err)
	}
	return nil
}

// sendVec writes one frame of the parts in a single writev, without
// copying them.
func (l *tcpLink) sendVec(tag collective.Tag, parts [][]byte) error {
	putHeader(&l.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(partsLen(parts))})
	l.wvs = append(append(l.wvs[:0], l.whdr[:]), parts...)
	l.wbuf = l.wvs
	_, err := l.wbuf.WriteTo(l.out)
	clear(l.wvs) // do not keep the caller's buffers reachable
	if err != nil {
		return l.c.ioFail(opSend, err)
	}
	return nil
}

// recvVec is recv into parts in order.
func (l *tcpLink) recvVec(tag collective.Tag, parts [][]byte) error {
	n := partsLen(parts)
	poll := n <= pollMax
	if err := l.r.readFull(l.rhdr[:], poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, n); err != nil {
		return err
	}
	for _, p := range parts {
		if err := l.r.readFull(p, poll); err != nil {
			return l.c.ioFail(opRecv, err)
		}
	}
	return nil
}

// recv reads one frame header, checks it against tag and len(p), then
// reads the payload into p. A recv of a small frame busy-polls (see
// pollMax and inbound).
func (l *tcpLink) recv(tag collective.Tag, p []byte) error {
	poll := len(p) <= pollMax
	if err := l.r.readFull(l.rhdr[:], poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	if err := l.c.checkHeader(l.rhdr[:], tag, len(p)); err != nil {
		return err
	}
	if err := l.r.readFull(p, poll); err != nil {
		return l.c.ioFail(opRecv, err)
	}
	return nil
}

// down has nothing to do: closing the sockets ended every call.
func (*tcpLink) down() {}

// wait has nothing to wait for.
func (*tcpLink) wait() {}
