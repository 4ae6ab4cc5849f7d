package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// ackByte is the server's last handshake byte: the peer passed every check
// and holds the link for its rank. A rejected peer reads EOF instead.
const ackByte = 'K'

// acceptRetry is the pause after an unexpected Accept error (for example
// too many open files) before accepting again.
const acceptRetry = 20 * time.Millisecond

// acceptLoop admits every connection ln accepted, from before Connect on
// (see Listener), each on its own goroutine so a silent intruder cannot
// hold up a real peer, until ln is closed. Before it returns it waits for
// every admission it started, then summarises the connections they
// rejected (see rejectLog).
func (f *formation) acceptLoop(ctx context.Context, ln *Listener) {
	rejects := newRejectLog(f.log, time.Now)
	var admitting sync.WaitGroup
	ln.serve(func(nc *net.TCPConn, at time.Time) {
		admitting.Go(func() { f.admit(ctx, nc, at, rejects) })
	}, func(err error) {
		f.log.Warn("tcptransport: accept failed", "err", err)
	})
	<-ln.done // no more admissions start
	admitting.Wait()
	rejects.flush()
}

// admit runs the server side of the handshake on nc and claims it for the
// peer's rank, or closes it and reports why: to rejects, or at Debug for a
// connection that was still handshaking when formation ended.
func (f *formation) admit(ctx context.Context, nc *net.TCPConn, accepted time.Time, rejects *rejectLog) {
	remote := nc.RemoteAddr().String()
	rank, l, err := f.serverHandshake(ctx, nc, accepted)
	if err != nil {
		if errors.Is(err, errSealed) {
			f.log.Debug("tcptransport: dropped connection", "remote", remote, "reason", err)
		} else {
			rejects.reject(remote, err)
			f.noteReject(remote, err)
		}
		nc.Close()
		return
	}
	f.log.Debug("tcptransport: peer connected", "peer", rank, "lane", l.name(f.cfg.Rank, rank), "remote", remote)
}

// serverHandshake authenticates nc, checks the rank, size and lane it
// claims and claims it, all before the handshake deadline, HandshakeTimeout
// after nc was accepted. If ctx ends meanwhile, nc is closed and errSealed
// returned.
func (f *formation) serverHandshake(ctx context.Context, nc *net.TCPConn, accepted time.Time) (int, lane, error) {
	if err := tune(nc, f.tun); err != nil {
		return 0, 0, err
	}
	deadline := accepted.Add(f.cfg.HandshakeTimeout)
	release := closeOnDone(ctx, nc)
	s, rank, l, err := f.authenticate(nc, deadline)
	if !release() {
		return 0, 0, errSealed
	}
	if err != nil {
		return 0, 0, err
	}
	if l == laneCall {
		// A lower rank asks for the link: dial it, as if this rank had
		// needed it first, and hang up.
		if !f.lazy || f.eager[rank] {
			return 0, 0, fmt.Errorf("rank %d calls for a link that forms when the mesh does", rank)
		}
		err := writeAck(s, deadline)
		nc.Close()
		if err == nil {
			f.dial(rank)
		}
		return rank, l, err
	}
	return rank, l, f.claim(rank, l, s, func() error { return writeAck(s, deadline) })
}

// authenticate runs the guard's server side and validates the peer's
// hello: a higher rank of a job of the same size, opening a lane to or from
// this rank, or a lower rank calling for a link (laneCall). It returns the
// lane nc becomes.
func (f *formation) authenticate(nc *net.TCPConn, deadline time.Time) (*sock, int, lane, error) {
	lc := &laneConn{TCPConn: nc}
	stream, peerHello, err := f.guard.Server(lc, f.hello, deadline)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", collective.ErrAuth, err)
	}
	s := newSock(lc, stream)
	if rank, ok, err := checkCallHello(peerHello, f.cfg.Size, 0, f.cfg.Rank); ok {
		return s, rank, laneCall, err
	}
	rank, l, err := checkLaneHello(peerHello, f.cfg.Rank, f.cfg.Size, f.cfg.Rank+1, f.cfg.Size)
	return s, rank, l, err
}

// writeAck sends ackByte before deadline.
func writeAck(nc *sock, deadline time.Time) error {
	if err := nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := nc.Write([]byte{ackByte}); err != nil {
		return fmt.Errorf("write acknowledgement: %w", err)
	}
	return nc.SetWriteDeadline(time.Time{})
}

// sleep waits for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
