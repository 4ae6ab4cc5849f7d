package lifecycle

import (
	"context"
	"math"
	"net"
	"sync"
	"time"
)

// Gate admits goroutines (handlers, calls, watchers) until it is shut, and
// lets the owner wait for those admitted. Unlike a bare WaitGroup it never
// lets Add race with Wait: after Shut, Enter refuses.
type Gate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Enter admits one goroutine; it returns false once the gate is shut.
// Every successful Enter must be paired with Leave.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Leave marks an admitted goroutine as finished.
func (g *Gate) Leave() { g.wg.Done() }

// Shut refuses later Enters; it does not wait.
func (g *Gate) Shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Wait blocks until every admitted goroutine has left; call after Shut.
func (g *Gate) Wait() { g.wg.Wait() }

// Conns tracks connections that gorpc cannot interrupt by itself (a
// handshake in progress, a dial racing a client's Stop, a link served
// outside gorpc), so that shutting down can close them and no Stop waits
// for a deadline.
type Conns struct {
	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	emptied chan struct{} // closed when the set becomes empty; nil while empty
}

// Add tracks c; once the set is closed it closes c and returns false.
func (s *Conns) Add(c net.Conn) bool {
	added, _ := s.AddBelow(c, math.MaxInt)
	return added
}

// AddBelow is Add for a set of at most most connections: when it holds
// that many already, it closes c and reports full.
func (s *Conns) AddBelow(c net.Conn, most int) (added, full bool) {
	s.mu.Lock()
	closed := s.closed
	full = !closed && len(s.conns) >= most
	if !closed && !full {
		if s.conns == nil {
			s.conns = make(map[net.Conn]struct{})
		}
		if len(s.conns) == 0 {
			s.emptied = make(chan struct{})
		}
		s.conns[c] = struct{}{}
	}
	s.mu.Unlock()
	if closed || full {
		c.Close()
	}
	return !closed && !full, full
}

// Remove stops tracking c (without closing it).
func (s *Conns) Remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if len(s.conns) == 0 && s.emptied != nil {
		close(s.emptied)
		s.emptied = nil
	}
}

// Len is the number of tracked connections.
func (s *Conns) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// CloseAll closes every tracked connection and refuses later adds. It
// closes outside the lock: a connection's Close may call Remove.
func (s *Conns) CloseAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// IsClosed reports whether CloseAll ran.
func (s *Conns) IsClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// WaitEmpty waits until no connection is tracked, for at most d or until
// ctx ends.
func (s *Conns) WaitEmpty(ctx context.Context, d time.Duration) {
	s.mu.Lock()
	ch := s.emptied
	s.mu.Unlock()
	if ch == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}
