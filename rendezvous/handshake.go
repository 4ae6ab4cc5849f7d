package rendezvous

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
)

// onConnect is the server's gorpc OnConnect hook: the mutual HMAC
// handshake (inside TLS with ServerConfig.TLS, after which gorpc speaks
// through the session), under HandshakeTimeout, before gorpc reads any
// byte. A peer that fails it is logged (remote address only) and dropped.
// At most maxHandshakes connections are inside the handshake at once: one
// more is closed at once (logged at Warn once until one is admitted
// again). Stop closes connections still inside the handshake, so it never
// waits for the
// deadline.
func (s *Server) onConnect(remote string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", ErrAuth, rwc)
	}
	added, full := s.handshakes.AddBelow(conn, s.maxHandshakes)
	if full {
		if !s.refusing.Swap(true) {
			s.log.Warn("rendezvous: refused connections: too many in the handshake at once", "remote", remote, "limit", s.maxHandshakes)
		}
		return nil, fmt.Errorf("%w: %s: refused: %d connections in the handshake", ErrAuth, remote, s.maxHandshakes)
	}
	if !added {
		return nil, ErrStopped
	}
	s.refusing.Store(false)
	defer s.handshakes.Remove(conn)
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	stream, hello, err := s.guard.Server(conn, []byte(helloServer), deadline)
	if err == nil && string(hello) != helloClient {
		err = fmt.Errorf("%w: peer speaks %q, not the rendezvous protocol", auth.ErrAuth, hello)
	}
	if err != nil {
		if !s.handshakes.IsClosed() {
			s.log.Warn("rendezvous: rejected connection", "remote", remote, "err", err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrAuth, remote, err)
	}
	return stream, nil
}

// onConnect is the client's gorpc OnConnect hook: the dialing side of the
// handshake. Its outcome feeds the link state (Dial waits on it, errors
// quote it, the back-off counts failures).
func (c *Client) onConnect(_ string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", ErrAuth, rwc)
	}
	deadline := time.Now().Add(c.opts.handshakeTimeout)
	heard := &heardConn{Conn: conn}
	stream, hello, err := c.guard.Client(heard, []byte(helloClient), deadline)
	if err == nil && string(hello) != helloServer {
		err = fmt.Errorf("%w: server speaks %q, not the rendezvous protocol", auth.ErrAuth, hello)
	}
	if err != nil {
		err = fmt.Errorf("%w: handshake with %s: %w", ErrAuth, c.addr, err)
		if c.life.Err() == nil {
			c.log.Warn("rendezvous: handshake failed", "server", c.addr, "err", err)
			// A server that closed without a word (too many handshakes
			// at once) has not judged the secret: only a handshake it
			// took part in counts towards giving up.
			c.link.failed(err, heard.heard)
		}
		return nil, err
	}
	c.link.connected()
	c.log.Debug("rendezvous: connected", "server", c.addr, "tls", c.guard.TLS())
	if stream == net.Conn(heard) {
		return conn, nil // in clear: gorpc reads the socket itself
	}
	return stream, nil
}

// heardConn is a connection that notes whether the other end sent a byte.
type heardConn struct {
	net.Conn
	heard bool
}

func (h *heardConn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 {
		h.heard = true
	}
	return n, err
}

// dial is the client's gorpc Dial function. It retries refused
// connections itself, with back-off, until it has a connection or the
// client closes: gorpc would otherwise redial at once after a failed
// handshake. Connections are tracked so Close can close one that races it.
func (c *Client) dial(addr string) (io.ReadWriteCloser, error) {
	for {
		if err := c.link.pace(c.life); err != nil {
			return nil, err
		}
		d := net.Dialer{Timeout: c.opts.handshakeTimeout, KeepAlive: 15 * time.Second}
		conn, err := d.DialContext(c.life, "tcp", addr)
		if err != nil {
			if c.life.Err() != nil {
				return nil, ErrClosed
			}
			c.link.failed(fmt.Errorf("%w: dial %s: %w", ErrUnreachable, addr, err), false)
			c.log.Debug("rendezvous: dial failed", "server", addr, "err", err)
			continue
		}
		tc := &trackedConn{Conn: conn, set: &c.conns}
		if !c.conns.Add(tc) {
			return nil, ErrClosed
		}
		return tc, nil
	}
}

// trackedConn leaves its lifecycle.Conns when gorpc closes it.
type trackedConn struct {
	net.Conn
	set *lifecycle.Conns
}

// Close untracks and closes the connection.
func (t *trackedConn) Close() error {
	t.set.Remove(t)
	return t.Conn.Close()
}
