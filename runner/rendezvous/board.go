package rendezvous

import (
	"fmt"
	"sync"
)

// board is the server's state: registrations, the key-value store and the
// abort reason. Every change closes and replaces the changed channel, so
// waiters (blocking calls) wake up and look again.
type board struct {
	mu      sync.Mutex
	hosts   []string // planned host per rank; may be nil
	peers   []Peer   // by rank; Addr == "" means not registered yet
	count   int      // registered ranks
	kv      map[string][]byte
	aborted bool
	reason  string
	changed chan struct{}
	all     chan struct{} // closed once every rank registered
}

func newBoard(size int, hosts []string) *board {
	return &board{
		hosts:   hosts,
		peers:   make([]Peer, size),
		kv:      make(map[string][]byte),
		changed: make(chan struct{}),
		all:     make(chan struct{}),
	}
}

// notifyLocked wakes every waiter; b.mu must be held.
func (b *board) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// plannedHost is the configured host of rank, or "" if none was given.
func (b *board) plannedHost(rank int) string {
	if rank < len(b.hosts) {
		return b.hosts[rank]
	}
	return ""
}

// register records rank's address. It reports whether this was the first
// registration of the rank and whether it completed the table;
// registering the same address again is a no-op.
func (b *board) register(rank int, host, addr string) (fresh, complete bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.abortErrLocked(); err != nil {
		return false, false, err
	}
	if rank < 0 || rank >= len(b.peers) {
		return false, false, fmt.Errorf("%w: rank %d out of range [0, %d)", ErrBadRequest, rank, len(b.peers))
	}
	if addr == "" {
		return false, false, fmt.Errorf("%w: rank %d registered an empty address", ErrBadRequest, rank)
	}
	if host == "" {
		host = b.plannedHost(rank)
	}
	old := b.peers[rank]
	switch {
	case old.Addr == addr:
		return false, false, nil
	case old.Addr != "":
		return false, false, fmt.Errorf("%w: rank %d is registered at %s (host %s), not %s (host %s)",
			ErrConflict, rank, old.Addr, old.Host, addr, host)
	}
	b.peers[rank] = Peer{Rank: rank, Host: host, Addr: addr}
	b.count++
	complete = b.count == len(b.peers)
	if complete {
		close(b.all)
	}
	b.notifyLocked()
	return true, complete, nil
}

// tableLocked returns a copy of the table once every rank registered.
func (b *board) tableLocked() ([]Peer, bool) {
	if b.count < len(b.peers) {
		return nil, false
	}
	return append([]Peer(nil), b.peers...), true
}

// missing lists the ranks not registered yet, with their planned hosts.
func (b *board) missing() []Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Peer
	for r, p := range b.peers {
		if p.Addr == "" {
			out = append(out, Peer{Rank: r, Host: b.plannedHost(r)})
		}
	}
	return out
}

// registered is the number of ranks registered so far.
func (b *board) registered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// set stores a copy of value under key and wakes waiters.
func (b *board) set(key string, value []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.abortErrLocked(); err != nil {
		return err
	}
	b.kv[key] = append([]byte{}, value...)
	b.notifyLocked()
	return nil
}

// getLocked returns the value stored under key, if any.
func (b *board) getLocked(key string) ([]byte, bool) {
	v, ok := b.kv[key]
	return v, ok
}

// abort records the first abort reason and wakes waiters. It reports
// whether this call did the abort.
func (b *board) abort(reason string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted {
		return false
	}
	b.aborted, b.reason = true, reason
	b.notifyLocked()
	return true
}

// abortErrLocked is the error every call gets once the job is aborted.
func (b *board) abortErrLocked() error {
	if !b.aborted {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrAborted, b.reason)
}

// check runs cond under the lock. It returns cond's verdict, or the abort
// error, and the channel that signals the next change.
func (b *board) check(cond func() bool) (bool, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.abortErrLocked(); err != nil {
		return false, nil, err
	}
	return cond(), b.changed, nil
}
