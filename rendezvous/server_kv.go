package rendezvous

import (
	"context"
	"fmt"
)

// Value returns a copy of the value that a rank stored under key with
// Client.Set, and whether there is one. It lets the launcher read what
// ranks report (runner reads why a failed rank failed this way).
func (s *Server) Value(key string) ([]byte, bool) {
	s.board.mu.Lock()
	defer s.board.mu.Unlock()
	v, ok := s.board.getLocked(key)
	if !ok {
		return nil, false
	}
	return append([]byte{}, v...), true
}

// Changed returns a channel that is closed at the server's next change: a
// rank registers, a value is set, or the job is aborted. Take the channel
// before reading the state it guards (Registered, Missing, Value), so that
// no change can fall between the two.
func (s *Server) Changed() <-chan struct{} {
	s.board.mu.Lock()
	defer s.board.mu.Unlock()
	return s.board.changed
}

// Set stores a copy of value under key, as Client.Set does, for the
// launcher itself (runner publishes an elastic job's generations this
// way). The context is not used: the store is in this process.
func (s *Server) Set(_ context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrBadRequest, len(value), MaxValueLen)
	}
	return s.board.set(key, value)
}
