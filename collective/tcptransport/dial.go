package tcptransport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
)

// Back-off between dials of a peer that is not accepting yet.
const (
	dialBackoffMin = 10 * time.Millisecond
	dialBackoffMax = 500 * time.Millisecond
)

// dialLoop dials peer (a lower rank) until a link is claimed or ctx ends.
// Failures to reach the peer are expected while it starts and are logged
// at Debug; a peer reached that then fails the handshake is logged at Warn.
func (f *formation) dialLoop(ctx context.Context, peer int) {
	addr := f.cfg.Addrs[peer]
	for backoff := dialBackoffMin; ; backoff = min(2*backoff, dialBackoffMax) {
		reached, err := f.dialOnce(ctx, peer)
		if err == nil {
			f.log.Debug("tcptransport: connected to peer", "peer", peer, "addr", addr)
			return
		}
		if ctx.Err() != nil {
			return
		}
		f.noteDialError(peer, err)
		level := slog.LevelDebug
		if reached {
			level = slog.LevelWarn
		}
		f.log.Log(ctx, level, "tcptransport: dial failed", "peer", peer, "addr", addr, "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// dialOnce connects to peer, runs the client handshake and claims the
// socket. reached reports whether a TCP connection was established.
func (f *formation) dialOnce(ctx context.Context, peer int) (reached bool, err error) {
	d := net.Dialer{Timeout: f.cfg.HandshakeTimeout}
	c, err := d.DialContext(ctx, "tcp", f.cfg.Addrs[peer])
	if err != nil {
		return false, err
	}
	nc := c.(*net.TCPConn)
	if err := f.clientHandshake(ctx, nc, peer); err != nil {
		nc.Close()
		return true, err
	}
	if err := f.claim(peer, nc, nil); err != nil {
		nc.Close()
		return true, err
	}
	return true, nil
}

// clientHandshake authenticates the server, checks that it is peer of a
// job of our size and waits for its acknowledgement, all before the
// handshake deadline. If ctx ends meanwhile, nc is closed.
func (f *formation) clientHandshake(ctx context.Context, nc *net.TCPConn, peer int) error {
	if err := tune(nc, f.cfg.sockBuf); err != nil {
		return err
	}
	deadline := time.Now().Add(f.cfg.HandshakeTimeout)
	release := closeOnDone(ctx, nc)
	err := f.exchange(nc, peer, deadline)
	if !release() {
		return errSealed
	}
	return err
}

func (f *formation) exchange(nc *net.TCPConn, peer int, deadline time.Time) error {
	got, err := auth.Client(nc, f.cfg.Secret, f.hello, deadline)
	if err != nil {
		return fmt.Errorf("%w: %w", collective.ErrAuth, err)
	}
	if _, err := checkHello(got, f.cfg.Size, peer, peer+1); err != nil {
		return err
	}
	return readAck(nc, deadline)
}

// readAck waits for the server's ackByte before deadline. EOF means the
// server rejected us after the handshake (its log says why).
func readAck(nc *net.TCPConn, deadline time.Time) error {
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
