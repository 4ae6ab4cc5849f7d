package tcptransport

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// maxEarly bounds the connections a Listener holds before Connect takes
// it; one more is closed at once.
const maxEarly = 1024

// Listener accepts the data-plane connections of higher ranks. Create it
// with Listen before publishing its address, then hand it to Connect, which
// owns it from then on and closes it before returning.
//
// A Listener accepts from the moment Listen returns, so that no connection
// waits unread in the kernel's backlog while this rank is still at the
// rendezvous. Until Connect takes the listener it holds what it accepted
// (at most 1024 connections; more are closed at once) and closes each one
// that Connect has not taken within DefaultHandshakeTimeout of its accept;
// Connect runs the handshake on the rest with a deadline of its
// HandshakeTimeout counted from their accept. So a connection that never
// completes the handshake, before Connect or during it, is closed within
// the handshake timeout of its accept.
type Listener struct {
	ln      *net.TCPListener
	hold    time.Duration // how long a connection waits for Connect
	most    int           // how many connections wait for Connect at most
	closing chan struct{} // closed by Close
	done    chan struct{} // closed when the accept goroutine ends
	once    sync.Once

	mu     sync.Mutex
	early  map[*net.TCPConn]held // accepted before serve
	handle func(nc *net.TCPConn, at time.Time)
	warn   func(err error)
	closed bool // the accept goroutine has ended: no more handle calls
}

// Listen opens a TCP listener on addr, for example "127.0.0.1:0" or ":0",
// and starts accepting on it (see Listener).
func Listen(addr string) (*Listener, error) {
	return listen(addr, DefaultHandshakeTimeout, maxEarly)
}

// listen is Listen holding at most most early connections, each for hold.
func listen(addr string, hold time.Duration, most int) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcptransport: listen: %w", err)
	}
	l := &Listener{
		ln:      ln.(*net.TCPListener),
		hold:    hold,
		most:    most,
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		early:   map[*net.TCPConn]held{},
	}
	go l.acceptAll()
	return l, nil
}

// Addr returns the address the listener is bound to, with the real port.
// For a wildcard listen address (":0") the host part is the wildcard too:
// publish a host that peers can reach, with this port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops listening, closes the connections held for Connect and waits
// for the accepting to end. It is safe to call more than once.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closing)
		_ = l.ln.Close() // a second close reports net.ErrClosed: nothing to do
	})
	<-l.done
	return nil
}

// acceptAll accepts until the listener is closed: each connection goes to
// handle once serve has set it, and is held until then.
func (l *Listener) acceptAll() {
	defer close(l.done)
	for {
		nc, err := l.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.shut()
				return
			}
			l.mu.Lock()
			warn := l.warn
			l.mu.Unlock()
			if warn != nil {
				warn(err)
			}
			select {
			case <-time.After(acceptRetry):
			case <-l.closing:
			}
			continue
		}
		at := time.Now()
		l.mu.Lock()
		switch handle := l.handle; {
		case handle != nil:
			l.mu.Unlock()
			handle(nc, at)
		case len(l.early) >= l.most:
			l.mu.Unlock()
			nc.Close()
		default:
			l.early[nc] = held{at: at, expiry: time.AfterFunc(l.hold, func() { l.expire(nc) })}
			l.mu.Unlock()
		}
	}
}

// held is a connection accepted before Connect: when, and the timer that
// closes it if Connect has not taken it by then.
type held struct {
	at     time.Time
	expiry *time.Timer
}

// expire closes nc if it is still held for Connect.
func (l *Listener) expire(nc *net.TCPConn) {
	l.mu.Lock()
	_, held := l.early[nc]
	delete(l.early, nc)
	l.mu.Unlock()
	if held {
		nc.Close()
	}
}

// shut closes the connections still held, once the listener is closed.
func (l *Listener) shut() {
	l.mu.Lock()
	l.closed = true
	early := l.early
	l.early = nil
	l.mu.Unlock()
	for nc, h := range early {
		h.expiry.Stop()
		nc.Close()
	}
}

// serve hands every connection accepted so far and from now on to handle,
// with the time of its accept, and accept errors to warn; handle runs on
// the accepting goroutine, so it must not block. Once the listener is
// closed and done is closed, handle is called no more. serve is called
// once, by Connect.
func (l *Listener) serve(handle func(nc *net.TCPConn, at time.Time), warn func(err error)) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.handle, l.warn = handle, warn
	early := l.early
	l.early = map[*net.TCPConn]held{}
	l.mu.Unlock()
	for nc, h := range early {
		h.expiry.Stop() // if it fired, expire found nc gone and left it
		handle(nc, h.at)
	}
}
