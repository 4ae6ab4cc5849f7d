package tcptransport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// Back-off between dials of a peer that is not accepting yet.
const (
	dialBackoffMin = 10 * time.Millisecond
	dialBackoffMax = 500 * time.Millisecond
)

// dialLoop dials lane l of the link to peer (a lower rank) until it is
// claimed or ctx ends.
// Failures to reach the peer are expected while it starts and are logged
// at Debug; a peer reached that then fails the handshake is logged at Warn.
func (f *formation) dialLoop(ctx context.Context, peer int, l lane) {
	addr := f.cfg.Addrs[peer]
	for backoff := dialBackoffMin; ; backoff = min(2*backoff, dialBackoffMax) {
		reached, err := f.dialOnce(ctx, peer, l)
		if err == nil {
			f.log.Debug("tcptransport: connected to peer", "peer", peer, "addr", addr, "lane", l.name(f.cfg.Rank, peer))
			return
		}
		if ended(ctx) {
			return // the failure is the deadline's, not the peer's: keep the last real cause
		}
		f.noteDialError(peer, err)
		level := slog.LevelDebug
		if reached {
			level = slog.LevelWarn
		}
		f.log.Log(ctx, level, "tcptransport: dial failed", "peer", peer, "addr", addr,
			"lane", l.name(f.cfg.Rank, peer), "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// ended reports whether ctx is done or its deadline has passed. A dial
// bounded by ctx's deadline can fail with a timeout a moment before ctx
// itself reports the deadline; such a failure says nothing about the peer.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// dialOnce connects to peer, runs the client handshake for lane l and
// claims the socket. reached reports whether a TCP connection was
// established.
func (f *formation) dialOnce(ctx context.Context, peer int, l lane) (reached bool, err error) {
	d := net.Dialer{Timeout: f.cfg.HandshakeTimeout}
	c, err := d.DialContext(ctx, "tcp", f.cfg.Addrs[peer])
	if err != nil {
		return false, err
	}
	nc := c.(*net.TCPConn)
	s, err := f.clientHandshake(ctx, nc, peer, l)
	if err != nil {
		nc.Close()
		return true, err
	}
	if err := f.claim(peer, l, s, nil); err != nil {
		nc.Close()
		return true, err
	}
	return true, nil
}

// clientHandshake authenticates the server, checks that it is peer of a
// job of our size, names lane l and waits for the acknowledgement, all
// before the handshake deadline. If ctx ends meanwhile, nc is closed.
func (f *formation) clientHandshake(ctx context.Context, nc *net.TCPConn, peer int, l lane) (*sock, error) {
	if err := tune(nc, f.tun); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(f.cfg.HandshakeTimeout)
	release := closeOnDone(ctx, nc)
	s, err := f.exchange(nc, peer, l, deadline)
	if !release() {
		return nil, errSealed
	}
	return s, err
}

// exchange runs the client handshake of lane l on nc and returns the lane.
func (f *formation) exchange(nc *net.TCPConn, peer int, l lane, deadline time.Time) (*sock, error) {
	from, to := f.cfg.Rank, peer
	if l == laneIn {
		from, to = peer, f.cfg.Rank
	}
	lc := &laneConn{TCPConn: nc}
	stream, got, err := f.guard.Client(lc, laneHello(f.cfg.Rank, f.cfg.Size, from, to), deadline)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", collective.ErrAuth, err)
	}
	if _, err := checkHello(got, f.cfg.Size, peer, peer+1); err != nil {
		return nil, err
	}
	s := newSock(lc, stream)
	return s, readAck(s, deadline)
}

// readAck waits for the server's ackByte before deadline. EOF means the
// server rejected us after the handshake (its log says why).
func readAck(nc *sock, deadline time.Time) error {
	if err := nc.SetReadDeadline(deadline); err != nil {
		return err
	}
	var b [1]byte
	if _, err := nc.Read(b[:]); err != nil {
		return fmt.Errorf("peer refused the link after the handshake (see its log): %w", err)
	}
	if b[0] != ackByte {
		return fmt.Errorf("bad acknowledgement byte %#x", b[0])
	}
	return nc.SetReadDeadline(time.Time{})
}

// callLoop asks peer, a higher rank, to dial the link between them (see
// callFormat), retrying with back-off until the peer has acknowledged once
// or ctx ends.
func (f *formation) callLoop(ctx context.Context, peer int) {
	for backoff := dialBackoffMin; ; backoff = min(2*backoff, dialBackoffMax) {
		err := f.callOnce(ctx, peer)
		if err == nil || ended(ctx) {
			return
		}
		f.noteDialError(peer, err)
		f.log.Debug("tcptransport: call for a link failed", "peer", peer, "addr", f.cfg.Addrs[peer], "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// callOnce connects to peer, authenticates it, asks it to dial this rank
// and waits for its acknowledgement.
func (f *formation) callOnce(ctx context.Context, peer int) error {
	d := net.Dialer{Timeout: f.cfg.HandshakeTimeout}
	c, err := d.DialContext(ctx, "tcp", f.cfg.Addrs[peer])
	if err != nil {
		return err
	}
	nc := c.(*net.TCPConn)
	defer nc.Close()
	deadline := time.Now().Add(f.cfg.HandshakeTimeout)
	release := closeOnDone(ctx, nc)
	defer release()
	lc := &laneConn{TCPConn: nc}
	stream, got, err := f.guard.Client(lc, callHello(f.cfg.Rank, f.cfg.Size), deadline)
	if err != nil {
		return fmt.Errorf("%w: %w", collective.ErrAuth, err)
	}
	if _, err := checkHello(got, f.cfg.Size, peer, peer+1); err != nil {
		return err
	}
	return readAck(newSock(lc, stream), deadline)
}
