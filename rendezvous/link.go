package rendezvous

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Back-off between connection attempts: the first retry waits backoffBase,
// each further failure doubles it up to backoffMax, with ±20% jitter. Even
// after a success, attempts start at least minRedial apart.
const (
	backoffBase = 50 * time.Millisecond
	backoffMax  = time.Second
	minRedial   = 50 * time.Millisecond
)

// link is the client's view of its connection: whether a handshake ever
// succeeded, consecutive failures (for back-off and for Dial's verdict) and
// the last connection error (quoted in call errors).
type link struct {
	mu        sync.Mutex
	ready     chan struct{} // closed by the first successful handshake
	isReady   bool
	fails     int // consecutive dial or handshake failures
	authFails int // consecutive handshake failures
	lastErr   error
	last      time.Time // start of the latest attempt
	changed   chan struct{}
}

func newLink() *link {
	return &link{ready: make(chan struct{}), changed: make(chan struct{})}
}

// connected records a successful handshake.
func (l *link) connected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails, l.authFails, l.lastErr = 0, 0, nil
	if !l.isReady {
		l.isReady = true
		close(l.ready)
	}
	l.notifyLocked()
}

// failed records a failed dial (handshake false) or handshake.
func (l *link) failed(err error, handshake bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails++
	if handshake {
		l.authFails++
	}
	l.lastErr = err
	l.notifyLocked()
}

func (l *link) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// state returns a snapshot and the channel that signals the next change.
func (l *link) state() (ready bool, authFails int, lastErr error, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.isReady, l.authFails, l.lastErr, l.changed
}

// lastError is the latest connection failure, nil after a success.
func (l *link) lastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// pace sleeps before the next connection attempt, as the back-off asks,
// and returns early with ErrClosed when ctx ends.
func (l *link) pace(ctx context.Context) error {
	l.mu.Lock()
	wait := backoff(l.fails)
	if next := l.last.Add(minRedial); wait < time.Until(next) {
		wait = time.Until(next)
	}
	l.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ErrClosed
		}
	}
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
	return nil
}

// backoff is the delay after fails consecutive failures.
func backoff(fails int) time.Duration {
	if fails <= 0 {
		return 0
	}
	d := backoffBase << min(fails-1, 8)
	d = min(d, backoffMax)
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * jitter)
}
