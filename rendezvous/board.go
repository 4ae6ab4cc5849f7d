package rendezvous

import (
	"fmt"
	"sync"
)

// board is the server's state: registrations, grouped in rounds, the
// key-value store and the abort reason. Every change closes and replaces
// the changed channel, so waiters (blocking calls) wake up and look again.
//
// A job forms its mesh once per round. Round 1 starts with the server and
// is complete once every rank has registered in it; its table is then
// fixed. A rank whose runtime shut down (or gave up joining) leaves. When
// it registers again, with the new address of its next runtime, it starts
// the next round if its own round is complete, joins the next round if
// another rank started it already, or takes its place again in a round
// still forming. The next table is complete only once every rank has
// registered in the new round, so a rank that re-registers early never
// reads the stale addresses of the round before; that previous table stays
// readable for the ranks of the old round that have not read it yet. A new
// address for a rank that has not left is a conflict: two processes claim
// the rank.
type board struct {
	mu     sync.Mutex
	hosts  []string // planned host per rank; may be nil
	slots  []slot   // by rank
	round  int      // the current round, from 1
	table  []Peer   // the current round's table once complete; nil before
	prev   []Peer   // the previous round's table; nil in round 1
	single bool     // serve one round only (ServerConfig.SingleRound)

	kv      map[string][]byte
	aborted bool
	reason  string
	changed chan struct{}
	all     chan struct{} // closed once every rank registered in round 1
}

// slot is one rank's latest registration.
type slot struct {
	Peer      // Addr == "": the rank never registered
	round int // the round it registered in
	left  bool
}

// in reports whether s holds a registration in round that has not left.
func (s slot) in(round int) bool { return s.Addr != "" && !s.left && s.round == round }

func newBoard(size int, hosts []string, single bool) *board {
	return &board{
		hosts:   hosts,
		slots:   make([]slot, size),
		round:   1,
		single:  single,
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

// checkRankLocked refuses a rank out of range.
func (b *board) checkRankLocked(rank int) error {
	if rank < 0 || rank >= len(b.slots) {
		return fmt.Errorf("%w: rank %d out of range [0, %d)", ErrBadRequest, rank, len(b.slots))
	}
	return nil
}

// register records rank's address. It reports whether this was a new
// registration, whether it completed its round's table, and the round.
// Registering the same address again is a no-op.
func (b *board) register(p Peer) (fresh, complete bool, round int, err error) {
	rank, host, addr := p.Rank, p.Host, p.Addr
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.abortErrLocked(); err != nil {
		return false, false, 0, err
	}
	if err := b.checkRankLocked(rank); err != nil {
		return false, false, 0, err
	}
	if addr == "" {
		return false, false, 0, fmt.Errorf("%w: rank %d registered an empty address", ErrBadRequest, rank)
	}
	if len(p.Machine) > MaxMachineLen {
		return false, false, 0, fmt.Errorf("%w: rank %d registered a machine of %d bytes, want at most %d", ErrBadRequest, rank, len(p.Machine), MaxMachineLen)
	}
	if host == "" {
		host = b.plannedHost(rank)
	}
	old := b.slots[rank]
	switch {
	case old.Addr == addr && !old.left:
		return false, false, old.round, nil
	case b.single && b.table != nil:
		return false, false, 0, fmt.Errorf("%w: this rendezvous served its round and is closing; rank %d will find the next one at the same address",
			ErrStopped, rank)
	case old.Addr != "" && !old.left:
		return false, false, 0, fmt.Errorf("%w: rank %d is registered at %s (host %s), not %s (host %s), and has not left",
			ErrConflict, rank, old.Addr, old.Host, addr, host)
	}
	if b.table != nil { // this rank's round is complete: it starts the next one
		b.prev, b.table = b.table, nil
		b.round++
	}
	b.slots[rank] = slot{Peer: Peer{Rank: rank, Host: host, Addr: addr, Machine: p.Machine}, round: b.round}
	if complete = b.fullLocked(); complete {
		b.table = make([]Peer, len(b.slots))
		for r, s := range b.slots {
			b.table[r] = s.Peer
		}
		if b.round == 1 {
			close(b.all)
		}
	}
	b.notifyLocked()
	return true, complete, b.round, nil
}

// fullLocked reports whether every rank is registered in the current round.
func (b *board) fullLocked() bool {
	for _, s := range b.slots {
		if !s.in(b.round) {
			return false
		}
	}
	return true
}

// leave withdraws rank's registration at addr. It reports whether there
// was one to withdraw; a registration that was replaced already stays.
func (b *board) leave(rank int, addr string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.abortErrLocked(); err != nil {
		return false, err
	}
	if err := b.checkRankLocked(rank); err != nil {
		return false, err
	}
	s := &b.slots[rank]
	if s.Addr != addr || s.left {
		return false, nil
	}
	s.left = true
	b.notifyLocked()
	return true, nil
}

// tableLocked returns a copy of the table of the round that rank's
// registration at addr belongs to, once that round is complete. Without
// an address (a caller that never registered) it is the current round's.
func (b *board) tableLocked(rank int, addr string) ([]Peer, bool) {
	round := b.round
	if addr != "" {
		if rank < 0 || rank >= len(b.slots) || b.slots[rank].Addr != addr {
			return nil, false
		}
		round = b.slots[rank].round
	}
	switch {
	case round == b.round && b.table != nil:
		return append([]Peer(nil), b.table...), true
	case round == b.round-1:
		return append([]Peer(nil), b.prev...), true
	}
	return nil, false
}

// missing lists the ranks not registered in the current round yet, with
// their planned hosts; none once the round is complete.
func (b *board) missing() []Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.missingLocked()
}

func (b *board) missingLocked() []Peer {
	if b.table != nil {
		return nil
	}
	var out []Peer
	for r, s := range b.slots {
		if !s.in(b.round) {
			out = append(out, Peer{Rank: r, Host: b.plannedHost(r)})
		}
	}
	return out
}

// registered is the number of ranks registered in the current round.
func (b *board) registered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.slots) - len(b.missingLocked())
}

// currentRound is the number of the current round, from 1.
func (b *board) currentRound() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.round
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
