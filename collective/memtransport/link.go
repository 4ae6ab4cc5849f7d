package memtransport

import (
	"context"
	"sync"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// A link joins two ranks. Its two ends each hold the queue of messages
// addressed to their rank and the state of that rank's side. One mutex
// guards both ends; every change closes and replaces changed, which wakes
// the waiting Recvs.
type link struct {
	mu      sync.Mutex
	ranks   [2]int // ranks[i] owns ends[i]
	ends    [2]end
	changed chan struct{}
}

// An end is one rank's side of a link.
type end struct {
	inbox   []message     // messages for this rank, oldest first
	lastAt  time.Time     // delivery time of the newest message in inbox
	delay   time.Duration // added to the delivery time of new messages
	err     error         // sticky failure of this side
	peerErr error         // the other side is gone: fail once inbox drains
}

// A message is a copy of what was sent, deliverable from at on.
type message struct {
	tag  collective.Tag
	data []byte
	at   time.Time
}

func newLink(a, b int) *link {
	return &link{ranks: [2]int{a, b}, changed: make(chan struct{})}
}

// side returns the index of rank's end.
func (l *link) side(rank int) int {
	if l.ranks[0] == rank {
		return 0
	}
	return 1
}

// notifyLocked wakes every goroutine waiting for a change.
func (l *link) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// failLocked fails side i with err unless it already failed, and returns the
// cause it keeps.
func (l *link) failLocked(i int, err error) error {
	if l.ends[i].err == nil {
		l.setErrLocked(i, err)
	}
	return l.ends[i].err
}

// setErrLocked fails side i with err, drops its queue, and tells the other
// side its peer is gone.
func (l *link) setErrLocked(i int, err error) {
	l.ends[i].err = err
	l.ends[i].inbox = nil
	if o := &l.ends[1-i]; o.peerErr == nil {
		o.peerErr = errPeerGone(l.ranks[1-i], l.ranks[i])
	}
	l.notifyLocked()
}

// breakLocked fails both sides at once; queued messages are lost.
func (l *link) breakLocked() {
	err := errBroken(l.ranks[0], l.ranks[1])
	for i := range l.ends {
		l.failLocked(i, err)
	}
}

// wait blocks until changed is closed, ctx ends, or until passes (when not
// zero). It returns ctx.Err() if ctx ended first.
func wait(ctx context.Context, changed <-chan struct{}, until time.Time) error {
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
		return nil
	case <-timeout:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
