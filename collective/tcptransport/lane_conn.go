package tcptransport

import (
	"net"
)

// gatherMax is how many bytes of TLS records a send gathers before one
// socket write: a session writes each record of up to tlsRecord bytes by
// itself, and at 64 MiB a frame would otherwise cost 4096 writes.
const gatherMax = 256 << 10

// laneConn is the connection a lane's TLS session runs over: its socket,
// with reads that may busy-poll first, as inbound's do (once the link has
// set in), and writes that a send may gather into few socket writes. The
// link drives both from the call in progress: recv sets poll, send sets
// gather and flushes. Before the link sets up (the handshakes) it is the
// plain socket.
type laneConn struct {
	*net.TCPConn
	in     *inbound // polling reads; nil: the socket's own
	poll   bool     // reads may poll first
	gather bool     // writes append to out until flush
	out    []byte
}

// Read reads what the socket holds, polling first if poll is set.
func (c *laneConn) Read(p []byte) (int, error) {
	if c.in == nil || len(p) == 0 {
		return c.TCPConn.Read(p)
	}
	return c.in.read(p, c.poll)
}

// Write sends p, or gathers it while gather is set.
func (c *laneConn) Write(p []byte) (int, error) {
	if !c.gather {
		return c.TCPConn.Write(p)
	}
	c.out = append(c.out, p...)
	if len(c.out) >= gatherMax {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes what was gathered.
func (c *laneConn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.TCPConn.Write(c.out)
	c.out = c.out[:0]
	return err
}
