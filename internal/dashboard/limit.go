package dashboard

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// busyResponse is what a connection over the cap gets before it is closed.
const busyResponse = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 29\r\n\r\n" +
	"dashboard: too many clients\r\n"

// limitListener holds at most max connections open at once. Unlike a
// listener that stops accepting when full (which would leave new clients
// waiting behind idle ones), it accepts the one too many, answers 503 and
// closes it at once, so the kernel's queue never fills and Accept never
// waits on the clients it holds.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: int64(max)}
}

// Accept returns the next connection under the cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			// A new connection's send buffer is empty: this short write
			// does not wait on the client; the deadline is a backstop.
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write([]byte(busyResponse))
			c.Close()
			continue
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

// limitConn gives its place back when closed, once.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
