package rendezvous

import (
	"math"
	"net"
	"sync"
)

// connSet tracks connections that gorpc cannot interrupt by itself (a
// handshake in progress, a dial racing Client.Stop), so that shutting down
// can close them and no Stop waits for a handshake deadline.
type connSet struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// add tracks c; once the set is closed it closes c and returns false.
func (s *connSet) add(c net.Conn) bool {
	added, _ := s.addBelow(c, math.MaxInt)
	return added
}

// addBelow is add for a set of at most most connections: when it holds
// that many already, it closes c and reports full.
func (s *connSet) addBelow(c net.Conn, most int) (added, full bool) {
	s.mu.Lock()
	closed := s.closed
	full = !closed && len(s.conns) >= most
	if !closed && !full {
		if s.conns == nil {
			s.conns = make(map[net.Conn]struct{})
		}
		s.conns[c] = struct{}{}
	}
	s.mu.Unlock()
	if closed || full {
		c.Close()
	}
	return !closed && !full, full
}

// remove stops tracking c (without closing it).
func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// len is the number of tracked connections.
func (s *connSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// closeAll closes every tracked connection and refuses later adds. It
// closes outside the lock: a connection's Close may call remove.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	clear(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// isClosed reports whether closeAll ran.
func (s *connSet) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
