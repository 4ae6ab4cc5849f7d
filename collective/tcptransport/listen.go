package tcptransport

import (
	"fmt"
	"net"
)

// Listener accepts the data-plane connections of higher ranks. Create it
// with Listen before publishing its address, then hand it to Connect, which
// owns it from then on and closes it before returning.
type Listener struct {
	ln *net.TCPListener
}

// Listen opens a TCP listener on addr, for example "127.0.0.1:0" or ":0".
func Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcptransport: listen: %w", err)
	}
	return &Listener{ln: ln.(*net.TCPListener)}, nil
}

// Addr returns the address the listener is bound to, with the real port.
// For a wildcard listen address (":0") the host part is the wildcard too:
// publish a host that peers can reach, with this port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops listening. It is safe to call more than once.
func (l *Listener) Close() error {
	_ = l.ln.Close() // a second close reports net.ErrClosed: nothing to do
	return nil
}
