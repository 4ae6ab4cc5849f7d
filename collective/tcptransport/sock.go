package tcptransport

import (
	"net"
	"time"
)

// sock is one lane of a link: its TCP socket, which is tuned, polled and
// closed as such, and the stream its bytes travel on after the handshake:
// the socket itself, or the TLS session over it (Config.TLS).
type sock struct {
	tcp  *net.TCPConn
	tls  net.Conn  // the TLS session; nil on a plain link
	lane *laneConn // what the session runs over; nil on a plain link
}

// newSock wraps the socket of lc and the stream the handshake over lc
// returned: lc itself on a plain link, or a TLS session over it.
func newSock(lc *laneConn, stream net.Conn) *sock {
	s := &sock{tcp: lc.TCPConn}
	if stream != net.Conn(lc) {
		s.tls, s.lane = stream, lc
	}
	return s
}

// Read reads from the lane's stream.
func (s *sock) Read(p []byte) (int, error) {
	if s.tls != nil {
		return s.tls.Read(p)
	}
	return s.tcp.Read(p)
}

// Write writes to the lane's stream.
func (s *sock) Write(p []byte) (int, error) {
	if s.tls != nil {
		return s.tls.Write(p)
	}
	return s.tcp.Write(p)
}

// Close closes the socket (a TLS session ends with it, without a
// close_notify: the links' ends are told by their own protocol).
func (s *sock) Close() error { return s.tcp.Close() }

// SetDeadline sets the socket's deadlines, which a TLS session shares.
func (s *sock) SetDeadline(t time.Time) error { return s.tcp.SetDeadline(t) }

// SetReadDeadline sets the socket's read deadline.
func (s *sock) SetReadDeadline(t time.Time) error { return s.tcp.SetReadDeadline(t) }

// SetWriteDeadline sets the socket's write deadline.
func (s *sock) SetWriteDeadline(t time.Time) error { return s.tcp.SetWriteDeadline(t) }
