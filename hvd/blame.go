package hvd

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/jobenv"
)

// reportTimeout bounds how long a failing rank spends telling gorun why it
// failed; the report is best effort.
const reportTimeout = 250 * time.Millisecond

// reportPeerFailures wraps the data plane of a rank that gorun started
// (r.rdv is set) so that gorun learns which of its ranks fail only because
// another one did, and can name the one that failed on its own. The rank
// stores the cause under jobenv.FailedBecauseKey in gorun's rendezvous
// before the failure reaches any operation, and so the program:
//
//   - a link's error that says the peer went away (collective.ErrPeerGone),
//     as it leaves Send or Recv: the peer's rank;
//   - a communicator failing with such an error found otherwise (another
//     rank saw the peer go), as the Comm closes the transport: the peer's
//     rank where the error names it;
//   - a communicator failing because ranks did not answer a negotiation
//     within the op timeout or stall shutdown time (*engine.NoAnswerError),
//     as the Comm closes the transport: jobenv.SilentBecause, naming them;
//   - a communicator failing because an operation a program ran on it
//     directly waited for a peer past the op timeout
//     (collective.ErrOpTimeout): jobenv.SilentBecause, naming that peer;
//   - an engine that a peer's shutdown stopped while operations were in
//     flight, as Shutdown closes the transport: jobenv.PeerShutdown.
//
// Only the first report counts; failures that come once this rank's own
// Shutdown has begun are not reported. Other transports are returned as
// they are.
func (r *Runtime) reportPeerFailures(tr collective.Transport) collective.Transport {
	if r.rdv == nil {
		return tr
	}
	b := &blameTransport{Transport: tr, r: r, conns: make([]collective.Conn, tr.Size())}
	for p := range b.conns {
		if p != tr.Rank() {
			b.conns[p] = &blameConn{Conn: tr.Conn(p), t: b, peer: p}
		}
	}
	r.links = b
	return b
}

// blameTransport is a Transport whose failures caused by peers are
// reported to gorun (see reportPeerFailures).
type blameTransport struct {
	collective.Transport
	r     *Runtime
	conns []collective.Conn // by peer; nil for this rank
	once  sync.Once         // the one report
	ranks []int             // a process set's links: the job's rank of each of the set's ranks; nil for the job's
}

// job returns the job's rank of the transport's rank i.
func (t *blameTransport) job(i int) int {
	if t.ranks == nil || i < 0 || i >= len(t.ranks) {
		return i
	}
	return t.ranks[i]
}

// Conn returns the reporting link to peer.
func (t *blameTransport) Conn(peer int) collective.Conn {
	if peer >= 0 && peer < len(t.conns) && t.conns[peer] != nil {
		return t.conns[peer]
	}
	return t.Transport.Conn(peer)
}

// Close reports why this rank fails, when a peer caused it (see
// reportPeerFailures), then closes the transport. The Comm calls it when it
// fails, after recording its cause, and when it is closed.
func (t *blameTransport) Close() error {
	if because := t.peerCause(); because != "" {
		t.report(because)
	}
	return t.Transport.Close()
}

// peerCause says which peer caused the failure that closes the transport:
// a rank, jobenv.PeerGone, jobenv.PeerShutdown, or "" for a failure of this
// rank's own (or none). r.comm is set before anything can close the
// transport; r.engine once Shutdown has begun.
func (t *blameTransport) peerCause() string {
	if t.shuttingDown() {
		if stoppedByPeerShutdown(t.r.engine.Err()) {
			return jobenv.PeerShutdown
		}
		return ""
	}
	err := t.r.comm.Err()
	if na, ok := errors.AsType[*engine.NoAnswerError](err); ok && len(na.Silent) > 0 {
		silent := make([]int, len(na.Silent))
		for i, p := range na.Silent {
			silent[i] = t.job(p)
		}
		return jobenv.SilentBecause(silent, na.Limit) // ranks that stopped answering
	}
	if te, ok := errors.AsType[*collective.OpTimeoutError](err); ok && te.Peer >= 0 {
		return jobenv.SilentBecause([]int{t.job(te.Peer)}, te.Limit) // a peer a Comm operation waited for in vain
	}
	if !errors.Is(err, collective.ErrPeerGone) {
		return ""
	}
	if oe, ok := errors.AsType[*collective.OpError](err); ok && oe.Peer >= 0 {
		return strconv.Itoa(t.job(oe.Peer))
	}
	return jobenv.PeerGone
}

// peerFailed reports err, a Send or Recv error on the link to peer, if it
// says that the peer went away.
func (t *blameTransport) peerFailed(peer int, err error) {
	if errors.Is(err, collective.ErrPeerGone) && !t.shuttingDown() {
		t.report(strconv.Itoa(t.job(peer)))
	}
}

// shuttingDown reports whether Shutdown has begun. Once it has, r.engine
// is set and may be read.
func (t *blameTransport) shuttingDown() bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.r.closed
}

// report stores why this rank fails in gorun's rendezvous, once. Callers
// that come while the report is being made wait for it, so no error
// leaves the transport before the report is in place.
func (t *blameTransport) report(because string) {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		defer cancel()
		if err := t.r.rdv.Set(ctx, jobenv.FailedBecauseKey(t.job(t.r.env.Rank)), []byte(because)); err != nil {
			t.r.log.Debug("hvd: cannot tell the launcher why this rank fails", "because", because, "err", err)
		}
	})
}

// stoppedByPeerShutdown reports whether err, an engine's cause, says that
// another rank shut down while operations were in flight (the engine's
// own Shutdown gives another message).
func stoppedByPeerShutdown(err error) bool {
	return errors.Is(err, engine.ErrShutdown) && strings.Contains(err.Error(), "shut down while tensors were in flight")
}

// blameConn is one reporting link. It also counts the payload bytes it
// sent and received, for the runtime series hvd/link_sent_bytes/P and
// hvd/link_recv_bytes/P (one atomic add a message, each on its own cache
// line: Send and Recv run on different goroutines).
type blameConn struct {
	collective.Conn
	t    *blameTransport
	peer int
	_    [64]byte
	sent atomic.Int64
	_    [56]byte
	recv atomic.Int64
}

// Send sends on the link, reporting a peer that went away.
func (c *blameConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	err := c.Conn.Send(ctx, tag, p)
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.sent.Add(int64(len(p)))
	return nil
}

// SendVec sends parts as one message on the link (see
// collective.Vectored), joined first if the wrapped link cannot gather
// them, reporting a peer that went away.
func (c *blameConn) SendVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	var err error
	if v, ok := c.Conn.(collective.Vectored); ok {
		err = v.SendVec(ctx, tag, parts)
	} else {
		err = c.Conn.Send(ctx, tag, bytes.Join(parts, nil))
	}
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.sent.Add(int64(vecLen(parts)))
	return nil
}

// vecLen is the total length of parts.
func vecLen(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// RecvVec receives one message into parts in order, through a buffer of
// its own if the wrapped link cannot scatter it, reporting a peer that
// went away.
func (c *blameConn) RecvVec(ctx context.Context, tag collective.Tag, parts [][]byte) error {
	var err error
	if v, ok := c.Conn.(collective.Vectored); ok {
		err = v.RecvVec(ctx, tag, parts)
	} else {
		buf := make([]byte, vecLen(parts))
		if err = c.Conn.Recv(ctx, tag, buf); err == nil {
			for _, p := range parts {
				buf = buf[copy(p, buf):]
			}
		}
	}
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.recv.Add(int64(vecLen(parts)))
	return nil
}

// Buffered passes on what the wrapped link promises to buffer (see
// collective.Buffered), so that wrapping it changes nothing.
func (c *blameConn) Buffered(messages int) int {
	if b, ok := c.Conn.(collective.Buffered); ok {
		return b.Buffered(messages)
	}
	return 0
}

// Backlog passes on the wrapped link's (see collective.Backlogged); a
// link that cannot tell says it holds a byte, so that nothing relies on
// it being empty.
func (c *blameConn) Backlog() int {
	if b, ok := c.Conn.(collective.Backlogged); ok {
		return b.Backlog()
	}
	return 1
}

// SendsInPlace passes on the wrapped link's answer (see
// collective.InPlace).
func (c *blameConn) SendsInPlace(n int) bool {
	in, ok := c.Conn.(collective.InPlace)
	return ok && in.SendsInPlace(n)
}

// SendWait sends on the link, perhaps waiting for the peer's Recv when the
// wrapped link can (see collective.Rendezvous), reporting a peer that went
// away.
func (c *blameConn) SendWait(ctx context.Context, tag collective.Tag, p []byte) error {
	var err error
	if rv, ok := c.Conn.(collective.Rendezvous); ok {
		err = rv.SendWait(ctx, tag, p)
	} else {
		err = c.Conn.Send(ctx, tag, p)
	}
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.sent.Add(int64(len(p)))
	return nil
}

// ReducesOnArrival is the wrapped link's answer (see
// collective.ReduceReceiver); false for one that cannot.
func (c *blameConn) ReducesOnArrival() bool {
	rr, ok := c.Conn.(collective.ReduceReceiver)
	return ok && rr.ReducesOnArrival()
}

// RecvReduce receives and reduces on the link, as it arrives where the
// wrapped link can, else through a buffer, reporting a peer that went
// away.
func (c *blameConn) RecvReduce(ctx context.Context, tag collective.Tag, dst []byte, esz int, reduce func(dst, src []byte)) error {
	var err error
	if rr, ok := c.Conn.(collective.ReduceReceiver); ok {
		err = rr.RecvReduce(ctx, tag, dst, esz, reduce)
	} else {
		tmp := make([]byte, len(dst))
		if err = c.Conn.Recv(ctx, tag, tmp); err == nil {
			reduce(dst, tmp)
		}
	}
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.recv.Add(int64(len(dst)))
	return nil
}

// Recv receives on the link, reporting a peer that went away.
func (c *blameConn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	err := c.Conn.Recv(ctx, tag, p)
	if err != nil {
		c.t.peerFailed(c.peer, err)
		return err
	}
	c.recv.Add(int64(len(p)))
	return nil
}

// CanExchange is the wrapped link's answer for the link from wraps (see
// collective.Exchanger); false for one that cannot exchange.
func (c *blameConn) CanExchange(from collective.Conn) bool {
	ex, ok := c.Conn.(collective.Exchanger)
	return ok && ex.CanExchange(unwrapBlame(from))
}

// Exchange moves a message each way on the wrapped links (see
// collective.Exchanger), reporting a peer that went away and counting
// the bytes of each direction that completed.
func (c *blameConn) Exchange(ctx context.Context, tag collective.Tag, p [][]byte, from collective.Conn, rtag collective.Tag, q [][]byte, arrived func(n int)) (sendErr, recvErr error) {
	sendErr, recvErr = c.Conn.(collective.Exchanger).Exchange(ctx, tag, p, unwrapBlame(from), rtag, q, arrived)
	if sendErr != nil {
		c.t.peerFailed(c.peer, sendErr)
	} else {
		c.sent.Add(int64(piecesLen(p)))
	}
	if f, ok := from.(*blameConn); ok {
		if recvErr != nil {
			f.t.peerFailed(f.peer, recvErr)
		} else {
			f.recv.Add(int64(piecesLen(q)))
		}
	}
	return sendErr, recvErr
}

// piecesLen is the bytes of ps together.
func piecesLen(ps [][]byte) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}

// unwrapBlame returns the link a blameConn wraps, or c itself.
func unwrapBlame(c collective.Conn) collective.Conn {
	if b, ok := c.(*blameConn); ok {
		return b.Conn
	}
	return c
}
