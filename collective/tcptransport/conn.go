package tcptransport

import (
	"context"
	"sync/atomic"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// conn is the collective.Conn to one peer: two TCP sockets, one per
// direction (lane), so that a Send and a Recv in progress never contend for
// a socket. Against one socket carrying both ways, two ranks in separate
// processes on the 2-CPU test VM ran a 64 MiB all-reduce at 2.6-2.9 rather
// than 2.2-2.4 GB/s on 42-48 rather than 51-58 ms of processor time, and a
// 4 KiB one in 22.5 rather than 31.5 µs. The frames travel over those
// sockets or, to a peer on this host, through shared memory: that is the
// conn's link, chosen when the mesh forms. Send and Recv use disjoint
// fields, so one of each may run at once without waiting for the other;
// the only state they share is the atomic failure.
type conn struct {
	out  *sock  // lane rank>peer: carries frames to the peer on a tcpLink
	in   *sock  // lane peer>rank: carries frames from the peer on a tcpLink
	rank int    // this rank
	peer int    // the rank at the other end
	host string // the peer's data-plane address

	failed atomic.Pointer[failure] // first cause; set once, then sticky
	link   link                    // how frames travel; set once by newConn

	sendWatch ctxWatch // touched only by the Send in progress
	recvWatch ctxWatch // touched only by the Recv in progress
}

// newConn wraps the two authenticated sockets of a link. With rings (a
// peer on this host whose shared-memory handshake succeeded) its frames
// travel through them and a watcher goroutine starts (see shm.Link.Watch);
// otherwise over the sockets, tuned by tun. broken, the failure of a
// shared-memory handshake that could not finish (see offerShm), fails the
// link before it carries a frame (see failBroken).
func newConn(l lanes, rank, peer int, host string, tun tuning, rings *shm.Rings, broken error) *conn {
	c := &conn{out: l[laneOut], in: l[laneIn], rank: rank, peer: peer, host: host}
	c.sendWatch.init(c, opSend)
	c.recvWatch.init(c, opRecv)
	if rings == nil {
		l := newTCPLink(c, tun.readBuf, tun.tcpPoll(), tun.nap, tun.rawIO)
		l.largeLook = tun.largeLook()
		c.link = l
		if broken != nil {
			failBroken(c, broken)
		}
		return c
	}
	sl := shm.NewLink(c, c.in, rings, tun.spin, tun.quick)
	sl.SetRemote(tun.remoteMin, tun.refuseRemote, tun.log)
	c.link = sl
	go sl.Watch()
	return c
}

// Send writes one frame: a header for tag and len(p), then p.
func (c *conn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.ready(ctx, opSend); err != nil {
		return err
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	return c.link.Send(tag, p)
}

// Recv reads one frame into p, after checking its header against tag and
// len(p).
func (c *conn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.ready(ctx, opRecv); err != nil {
		return err
	}
	c.recvWatch.begin(ctx)
	defer c.recvWatch.end()
	return c.link.Recv(tag, p)
}

// SendWait is Send that may wait for the peer's Recv (see
// collective.Rendezvous): on a shared-memory link a large payload stays in
// p for the peer to copy once (see shm.Link.SendWait); on TCP it is Send.
func (c *conn) SendWait(ctx context.Context, tag collective.Tag, p []byte) error {
	l, ok := c.link.(*shm.Link)
	if !ok {
		return c.Send(ctx, tag, p)
	}
	if err := c.ready(ctx, opSend); err != nil {
		return err
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	return l.SendWait(tag, p)
}

// SendsInPlace reports whether SendWait would leave a payload of n bytes
// for the peer to copy (see collective.InPlace): on a shared-memory link
// with remote frames on.
func (c *conn) SendsInPlace(n int) bool {
	l, ok := c.link.(*shm.Link)
	return ok && l.SendsInPlace(n)
}

// ReducesOnArrival reports whether RecvReduce folds frames as they
// arrive (see collective.ReduceReceiver): on a shared-memory link.
func (c *conn) ReducesOnArrival() bool {
	_, ok := c.link.(*shm.Link)
	return ok
}

// RecvReduce reads one frame and folds it into dst: on a shared-memory
// link as it arrives, straight from the ring (see shm.Link.RecvReduce);
// on TCP through a buffer of the frame's size.
func (c *conn) RecvReduce(ctx context.Context, tag collective.Tag, dst []byte, esz int, reduce func(dst, src []byte)) error {
	l, ok := c.link.(*shm.Link)
	if !ok || esz < 1 || esz > shm.MaxElem {
		tmp := make([]byte, len(dst))
		if err := c.Recv(ctx, tag, tmp); err != nil {
			return err
		}
		reduce(dst, tmp)
		return nil
	}
	if err := c.ready(ctx, opRecv); err != nil {
		return err
	}
	c.recvWatch.begin(ctx)
	defer c.recvWatch.end()
	return l.RecvReduce(tag, dst, esz, reduce)
}

// SendVec writes one frame whose payload is parts end to end (see
// collective.Vectored), without joining them.
func (c *conn) SendVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	if err := c.ready(ctx, opSend); err != nil {
		return err
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	return c.link.SendVec(tag, parts)
}

// RecvVec reads one frame into parts in order, after checking its header
// against tag and the parts' total length.
func (c *conn) RecvVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	if err := c.ready(ctx, opRecv); err != nil {
		return err
	}
	c.recvWatch.begin(ctx)
	defer c.recvWatch.end()
	return c.link.RecvVec(tag, parts)
}

// checkHeader checks the frame header hdr against the tag and payload
// length a Recv expects (see frame.Check); a mismatch fails the link.
func (c *conn) checkHeader(hdr []byte, tag collective.Tag, n int) error {
	if err := frame.Check(hdr, tag, n); err != nil {
		return c.protocolFail("%v", err)
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

func (b badConn) SendVec(context.Context, collective.Tag, [][]byte) error { return b.err }
func (b badConn) RecvVec(context.Context, collective.Tag, [][]byte) error { return b.err }

// Backlog is what a shared-memory link holds of this rank's frames unread
// (see collective.Backlogged); 0 over TCP, which promises nothing.
func (c *conn) Backlog() int {
	if l, ok := c.link.(*shm.Link); ok {
		return l.Backlog()
	}
	return 0
}

// Buffered is what the link to the peer holds unreceived, in payload bytes
// of messages frames (see collective.Buffered): a shared-memory ring's
// capacity (this rank's outbound one) less the frames' headers; nothing promised over TCP, whose
// socket buffers Linux sizes as it goes.
func (c *conn) Buffered(messages int) int {
	if l, ok := c.link.(*shm.Link); ok {
		return l.Buffered(messages)
	}
	return 0
}
