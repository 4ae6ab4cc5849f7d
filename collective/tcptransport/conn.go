package tcptransport

import (
	"context"
	"net"
	"sync/atomic"
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

// conn is the collective.Conn to one peer: two TCP sockets, one per
// direction (lane), so that a Send and a Recv in progress never contend for
// a socket. Against one socket carrying both ways, two ranks in separate
// processes on the 2-CPU test VM ran a 64 MiB all-reduce at 2.6-2.9 rather
// than 2.2-2.4 GB/s on 42-48 rather than 51-58 ms of processor time, and a
// 4 KiB one in 22.5 rather than 31.5 µs. Send and Recv use disjoint fields,
// so one of each may run at once without locks; the only shared state is
// the atomic failure.
type conn struct {
	out  *net.TCPConn // lane rank>peer: written by Send, never read
	in   *net.TCPConn // lane peer>rank: read by Recv, never written
	rank int          // this rank
	peer int          // the rank at the other end
	host string       // the peer's data-plane address

	failed atomic.Pointer[failure] // first cause; set once, then sticky

	// shm, if set, carries the frames instead of the sockets (a peer on
	// this host; see shmLink).
	shm *shmLink

	// Send side, touched only by the Send in progress.
	sendWatch ctxWatch
	whdr      [headerSize]byte
	wvec      [2][]byte
	wbuf      net.Buffers

	// Recv side, touched only by the Recv in progress.
	recvWatch ctxWatch
	rhdr      [headerSize]byte
	r         *inbound
}

// newConn wraps the two authenticated sockets of a link. readBuf > 0 puts
// a read buffer of that size in front of the receiving socket (see
// recvBuffer); spin > 0 lets small receives poll that long (see inbound).
func newConn(l lanes, rank, peer int, host string, readBuf int, spin time.Duration) *conn {
	c := &conn{out: l[laneOut], in: l[laneIn], rank: rank, peer: peer, host: host}
	c.sendWatch.init(c, opSend)
	c.recvWatch.init(c, opRecv)
	c.r = newInbound(c.in, readBuf, spin)
	return c
}

// Send writes one frame, header and payload in a single writev, without
// copying p.
func (c *conn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	if c.shm != nil {
		return c.shmSend(ctx, tag, p)
	}
	if err := c.ready(ctx, opSend); err != nil {
		return err
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	putHeader(&c.whdr, header{Seq: tag.Seq, Step: tag.Step, Len: uint64(len(p))})
	c.wvec[0], c.wvec[1] = c.whdr[:], p
	c.wbuf = c.wvec[:]
	_, err := c.wbuf.WriteTo(c.out)
	c.wvec[1] = nil // do not keep the caller's buffer reachable
	if err != nil {
		return c.ioFail(opSend, err)
	}
	return nil
}

// Recv reads one frame header, checks it against tag and len(p), then reads
// the payload into p. A Recv of a small frame busy-polls (see inbound).
func (c *conn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	if c.shm != nil {
		return c.shmRecv(ctx, tag, p)
	}
	if err := c.ready(ctx, opRecv); err != nil {
		return err
	}
	c.recvWatch.begin(ctx)
	defer c.recvWatch.end()
	poll := len(p) <= pollMax
	if err := c.r.readFull(c.rhdr[:], poll); err != nil {
		return c.ioFail(opRecv, err)
	}
	if err := c.checkHeader(tag, len(p)); err != nil {
		return err
	}
	if err := c.r.readFull(p, poll); err != nil {
		return c.ioFail(opRecv, err)
	}
	return nil
}

// checkHeader decodes the frame header in rhdr and checks it against the
// tag and payload length Recv expects; a mismatch fails the link.
func (c *conn) checkHeader(tag collective.Tag, n int) error {
	h, err := decodeHeader(c.rhdr[:])
	if err != nil {
		return c.protocolFail("%v", err)
	}
	if h.Seq != tag.Seq || h.Step != tag.Step || h.Len != uint64(n) {
		return c.protocolFail("expected seq %d step %d len %d, got seq %d step %d len %d",
			tag.Seq, tag.Step, n, h.Seq, h.Step, h.Len)
	}
	return nil
}

// ready returns the link's sticky failure, or the context's error if it
// ended before the call touched the stream (the link stays usable then).
func (c *conn) ready(ctx context.Context, op string) error {
	if f := c.failed.Load(); f != nil {
		return f.err
	}
	if ctx.Done() != nil && ctx.Err() != nil {
		return ctxError(ctx, c.where(op))
	}
	return nil
}

// badConn stands in for a link that does not exist (peer out of range or
// this rank itself); every call returns its error.
type badConn struct{ err error }

func (b badConn) Send(context.Context, collective.Tag, []byte) error { return b.err }
func (b badConn) Recv(context.Context, collective.Tag, []byte) error { return b.err }
