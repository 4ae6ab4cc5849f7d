package tcptransport

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// exchangeWait bounds how long an Exchange that waits for both of its
// sockets at once sleeps in ppoll(2) before it looks again whether either
// link has failed: closing a socket (Close, a cancelled context, the
// other direction's failure) does not wake a ppoll that watches it.
const exchangeWait = 5 * time.Millisecond

// CanExchange reports whether Exchange moves a frame to c's peer and one
// from from's peer together in the calling goroutine (see
// collective.Exchanger): both links run over plain TCP sockets.
func (c *conn) CanExchange(from collective.Conn) bool {
	f := formedConn(from)
	if f == nil {
		return false
	}
	sl, ok1 := c.link.(*tcpLink)
	rl, ok2 := f.link.(*tcpLink)
	return ok1 && ok2 && sl.sec == nil && rl.sec == nil
}

// formedConn returns the link c stands for, if it has formed: c itself,
// or what a lazyConn has become; nil otherwise.
func formedConn(c collective.Conn) *conn {
	switch c := c.(type) {
	case *conn:
		return c
	case *lazyConn:
		return c.t.slots[c.peer].formed.Load()
	}
	return nil
}

// Exchange sends the concatenation of p under tag to c's peer while it
// receives the frame under rtag from from's peer into q's pieces in
// order, in the calling goroutine (see collective.Exchanger), with no
// copy of either. It must only be called where CanExchange(from) holds.
func (c *conn) Exchange(ctx context.Context, tag collective.Tag, p [][]byte, from collective.Conn, rtag collective.Tag, q [][]byte, arrived func(n int)) (sendErr, recvErr error) {
	f := formedConn(from)
	sendErr, recvErr = c.ready(ctx, opSend), f.ready(ctx, opRecv)
	if sendErr != nil || recvErr != nil { // nothing moved: a link that is fine stays so
		if sendErr == nil {
			sendErr = c.notRun(opSend)
		}
		if recvErr == nil {
			recvErr = f.notRun(opRecv)
		}
		return sendErr, recvErr
	}
	c.sendWatch.begin(ctx)
	defer c.sendWatch.end()
	f.recvWatch.begin(ctx)
	defer f.recvWatch.end()
	x := exchangeOp{sl: c.link.(*tcpLink), rl: f.link.(*tcpLink), q: q, qlen: frame.PartsLen(q), arrived: arrived}
	x.sl.startSend(tag, p)
	defer x.sl.endSend()
	return x.run(rtag)
}

// notRun is what an Exchange reports for a direction that it did not
// start because the other one could not: the link is fine, and the error
// wraps collective.ErrClosed, which tells the communicator to look for the
// cause elsewhere.
func (c *conn) notRun(op string) error {
	return fmt.Errorf("%s: %w (not started: the exchange's other direction failed)", c.where(op), collective.ErrClosed)
}

// exchangeOp is one Exchange in progress.
type exchangeOp struct {
	sl, rl   *tcpLink
	q        [][]byte // where the received payload goes, in order
	qlen     int      // the bytes of q's pieces together
	arrived  func(int)
	hdrGot   int  // bytes of the received header read
	got      int  // bytes of q read, all pieces together
	k, off   int  // the piece of q being filled, and its bytes read
	hdrOK    bool // the header has been read and checked
	sendDone bool
	recvDone bool
}

// run moves both frames: it retries non-blocking writev and readv calls
// while either makes progress, and when neither does it sleeps until a
// socket is ready: first, where the link naps (tcpNap), in a raw ppoll,
// for up to that long over the whole exchange; then on the netpoller when
// one direction is left, in ppoll when both are. An exchange whose
// received payload is at most pollMax first polls, for the receiving
// socket's spin budget, as a small Recv does (see inbound); a larger one
// polls for tcpLink.largeLook, which is
// zero unless the rank knows that every rank that shares its processors
// has one of its own (see tuning.largeLook). Two ranks across emulated
// hosts (internal/testlab, unlimited veth links) on the loaded 2-CPU test
// VM ran a 64 KiB all-reduce at a median 79.5 µs sleeping at once against
// 33 µs for the pipelined executor's polling Recv, and at 28.5 µs polling
// here (twelve interleaved launches). Larger exchanges polling there for
// the whole spin budget, on BBR and before ranks knew their machines: at
// 256 KiB, polling took a median 100-117 µs in half of six launches and
// 561-574 µs in the others, the latter when both ranks shared a processor
// (taskset reproduced it: the poller holds the processor its peer needs;
// sched_yield in place of runtime.Gosched helped only some of the time),
// while sleeping at once took 176-294 µs (median 198), against 225-300 µs
// (median 286) for the pipelined executor. A failure of either direction
// ends the other one too (its stream position is lost), with the cause
// that it was closed here.
func (x *exchangeOp) run(rtag collective.Tag) (sendErr, recvErr error) {
	spin := x.rl.largeLook
	if x.qlen <= pollMax {
		spin = x.rl.r.spin
	}
	nap := x.rl.r.nap // up to this long in naps over the whole exchange
	if !naps(nap) {
		nap = 0
	}
	var idle, shared, napped time.Time
	for {
		sent, err := x.send(false)
		if err != nil {
			return x.abandon(x.sl.c.ioFail(opSend, err), nil)
		}
		recvd, err := x.recv(rtag, false)
		if err != nil {
			return x.abandon(nil, err)
		}
		if x.sendDone && x.recvDone {
			return nil, nil
		}
		if sent || recvd {
			idle = time.Time{}
			continue
		}
		if spin > 0 {
			now := time.Now()
			if idle.IsZero() {
				idle = now
			}
			if now.Sub(idle) < spin {
				shmring.ShareTurn(x.rl.r.share, &shared, now)
				continue
			}
		}
		if nap > 0 {
			now := time.Now()
			if napped.IsZero() {
				napped = now
			}
			if left := nap - now.Sub(napped); left > 0 {
				x.nap(left)
				continue
			}
		}
		switch {
		case x.recvDone:
			if _, err := x.send(true); err != nil {
				return x.abandon(x.sl.c.ioFail(opSend, err), nil)
			}
		case x.sendDone:
			if _, err := x.recv(rtag, true); err != nil {
				return x.abandon(nil, err)
			}
		default:
			// An error means a socket was closed: the next attempts
			// report whose failure that was.
			_ = x.waitBoth()
		}
	}
}

// abandon ends the exchange after a failure of one direction: the other
// one, if unfinished, fails too (its frame is partly moved), with the
// cause that it was closed here unless its link had failed already.
func (x *exchangeOp) abandon(sendErr, recvErr error) (error, error) {
	if sendErr != nil && !x.recvDone {
		recvErr = x.rl.c.fail(x.rl.c.closedError())
	}
	if recvErr != nil && !x.sendDone {
		sendErr = x.sl.c.fail(x.sl.c.closedError())
	}
	return sendErr, recvErr
}

// send writes what it can of the outgoing frame: one non-blocking writev,
// or with wait one that parks on the netpoller until some bytes go. It
// reports whether any did.
func (x *exchangeOp) send(wait bool) (bool, error) {
	if x.sendDone {
		return false, nil
	}
	n, err := x.sl.writeSome(wait)
	if err != nil {
		return false, err
	}
	x.sendDone = x.sl.wleft == 0
	return n > 0, nil
}

// recv reads what it can of the incoming frame (header, then payload),
// without waiting or, with wait, parking until some bytes come, and tells
// arrived about new payload bytes. It reports whether any bytes came; its
// errors have failed the link.
func (x *exchangeOp) recv(rtag collective.Tag, wait bool) (bool, error) {
	if x.recvDone {
		return false, nil
	}
	rl, progress := x.rl, false
	if !x.hdrOK {
		n, err := rl.r.readSome(rl.rhdr[x.hdrGot:], wait)
		if err != nil {
			return false, rl.c.ioFail(opRecv, err)
		}
		x.hdrGot += n
		if x.hdrGot < len(rl.rhdr) {
			return n > 0, nil
		}
		if err := rl.c.checkHeader(rl.rhdr[:], rtag, x.qlen); err != nil {
			return false, err
		}
		x.hdrOK, progress, wait = true, true, false
		if x.qlen == 0 {
			x.recvDone = true
			return true, nil
		}
	}
	// One read from the socket at most; pieces that what it brought
	// (held in the read buffer) fills go on without another.
	for {
		for len(x.q[x.k]) == x.off {
			x.k, x.off = x.k+1, 0
		}
		n, err := rl.r.readSome(x.q[x.k][x.off:], wait)
		if err != nil {
			return false, rl.c.ioFail(opRecv, err)
		}
		if n == 0 {
			break
		}
		x.off += n
		x.got += n
		progress, wait = true, false
		if x.got == x.qlen || !rl.r.buffered() {
			break
		}
	}
	x.recvDone = x.got == x.qlen
	if progress && x.got > 0 && x.arrived != nil {
		x.arrived(x.got)
	}
	return progress, nil
}

// waitBoth sleeps in ppoll(2) until the sending socket can take bytes or
// the receiving one has some (or an error, or end of stream), or for
// exchangeWait. It returns an error if either socket is closed.
func (x *exchangeOp) waitBoth() error {
	var perr error
	err := x.sl.wrc.Control(func(wfd uintptr) {
		perr = x.rl.r.rc.Control(func(rfd uintptr) {
			fds := [2]pollFd{{fd: int32(wfd), events: pollOut}, {fd: int32(rfd), events: pollIn}}
			ppoll(fds[:], exchangeWait, false)
		})
	})
	if err != nil {
		return err
	}
	return perr
}

// nap sleeps in rawPoll until a socket the exchange waits for is ready,
// for up to d (see tcpNap).
func (x *exchangeOp) nap(d time.Duration) {
	switch {
	case x.recvDone:
		x.sl.napOut(d)
	case x.sendDone:
		x.rl.r.napIn(d)
	default:
		x.sl.napBoth(x.rl, d)
	}
}

// pollFd is struct pollfd of poll(2).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1
	pollOut = 0x4
)

// maxIov caps the pieces of one writev(2) (IOV_MAX on Linux).
const maxIov = 1024

// startSend prepares the frame of tag and p's pieces for writeSome.
func (l *tcpLink) startSend(tag collective.Tag, p [][]byte) {
	n := frame.PartsLen(p)
	frame.Put(&l.whdr, frame.Header{Seq: tag.Seq, Step: tag.Step, Len: uint64(n)})
	l.wvs = append(append(l.wvs[:0], l.whdr[:]), p...)
	l.xk = 0
	l.wleft = len(l.whdr) + n
}

// endSend drops the references to the caller's payload.
func (l *tcpLink) endSend() {
	clear(l.wvs)
	l.wvs = l.wvs[:0]
}

// writeSome runs one writev of what is left of the frame in l.wvs (up to
// maxIov pieces of it): non blocking, or with wait parked on the
// netpoller until the socket takes some bytes. It returns how many it
// took.
func (l *tcpLink) writeSome(wait bool) (int, error) {
	if l.wrcErr != nil {
		return 0, l.wrcErr
	}
	l.wiov = l.wiov[:0]
	for _, b := range l.wvs[l.xk:] {
		if len(l.wiov) == maxIov {
			break
		}
		if len(b) > 0 {
			l.wiov = append(l.wiov, iovec(b))
		}
	}
	fn := l.writeFn
	if wait {
		fn = l.writeParkFn
	}
	err := l.wrc.Write(fn)
	clear(l.wiov)
	if err != nil {
		return 0, err
	}
	switch {
	case l.werrno == syscall.EAGAIN:
		return 0, nil
	case l.werrno != nil:
		return 0, os.NewSyscallError("writev", l.werrno)
	}
	n := l.wn
	for n > 0 || l.xk < len(l.wvs) && len(l.wvs[l.xk]) == 0 {
		k := min(n, len(l.wvs[l.xk]))
		l.wvs[l.xk] = l.wvs[l.xk][k:]
		n -= k
		if len(l.wvs[l.xk]) == 0 {
			l.xk++
		}
	}
	l.wleft -= l.wn
	return l.wn, nil
}

// writeOnce is the RawConn callback of a non-blocking writev.
func (l *tcpLink) writeOnce(fd uintptr) bool {
	l.writev(fd)
	return true
}

// writeOrPark is the RawConn callback of a writev that waits on the
// netpoller while the socket is full.
func (l *tcpLink) writeOrPark(fd uintptr) bool {
	l.writev(fd)
	return l.werrno != syscall.EAGAIN
}

// writev runs one writev(2) of the pieces in l.wiov, retrying on EINTR.
func (l *tcpLink) writev(fd uintptr) {
	l.wn, l.werrno = vectorIO(syscall.SYS_WRITEV, fd, &l.wiov[0], len(l.wiov), l.r.raw)
}

// readSome puts bytes of the stream into p, which must not be empty: what
// the read buffer holds, else what one readv returns, without waiting or,
// with wait, after parking on the netpoller until some come. It returns
// how many landed in p (0: none yet).
func (in *inbound) readSome(p []byte, wait bool) (int, error) {
	if in.r < in.w {
		n := copy(p, in.buf[in.r:in.w])
		in.r += n
		return n, nil
	}
	if in.rcFailed != nil {
		return 0, in.rcFailed
	}
	in.iov[0] = iovec(p)
	in.niov = 1
	if len(in.buf) > 0 {
		in.iov[1] = iovec(in.buf)
		in.niov = 2
	}
	fn := in.pollFn
	if wait {
		fn = in.parkFn
	}
	err := in.rc.Read(fn)
	in.release()
	if err != nil {
		return 0, err
	}
	if in.errno == syscall.EAGAIN {
		return 0, nil
	}
	if err := in.result(); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	got := min(in.n, len(p))
	in.r, in.w = 0, in.n-got
	return got, nil
}
