package deadline

import (
	"sync"
	"sync/atomic"
	"time"
)

// watchTicks is how many ticks of a Watch make its limit: an operation
// expires between the limit and an eighth of it later.
const watchTicks = 8

// Watch bounds operations that run one at a time, each by the same limit,
// at the cost of an atomic store and an atomic compare-and-swap an
// operation, and no context: a timer that ticks every limit/8, once the
// Watch has begun an operation, expires an operation that it has seen
// running for watchTicks ticks in a row, by calling the Watch's function
// with the operation's number. So an operation expires between limit and
// limit·9/8 after it began (later only when the timer itself runs late).
// Exactly one of End and the expiry claims each operation. Begin and End
// must not be called concurrently; Stop may be called at any time.
type Watch struct {
	limit  time.Duration
	expire func(op uint64)
	_      [64]byte
	state  atomic.Uint64 // 2·op+1 while operation op runs, else even; on a cache line of its own
	_      [56]byte

	mu      sync.Mutex // the ticker's state
	timer   *time.Timer
	seen    uint64 // the state the ticker saw at its last tick
	ticks   int    // its ticks in a row that saw the same operation running
	stopped bool
}

// NewWatch returns a Watch of limit, which must be positive, that calls
// expire (on the timer's goroutine) with the number of an operation that
// ran past it. expire must not call Begin or End.
func NewWatch(limit time.Duration, expire func(op uint64)) *Watch {
	return &Watch{limit: limit, expire: expire}
}

// Begin starts operation op (a number that differs from the previous
// operation's; below 2^63).
func (w *Watch) Begin(op uint64) {
	w.state.Store(2*op + 1)
	if w.timer == nil { // the first operation starts the ticker
		w.mu.Lock()
		if !w.stopped && w.timer == nil {
			w.timer = time.AfterFunc(w.limit/watchTicks, w.tick)
		}
		w.mu.Unlock()
	}
}

// End ends operation op and reports whether it expired first (then the
// Watch's function has been called for it, or is being called).
func (w *Watch) End(op uint64) (expired bool) {
	return !w.state.CompareAndSwap(2*op+1, 2*op)
}

// tick expires the operation that every one of the last watchTicks ticks
// saw running, and ticks again.
func (w *Watch) tick() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	s := w.state.Load()
	expired := false
	switch {
	case s%2 == 0 || s != w.seen:
		w.seen, w.ticks = s, 0 // idle, or began since the last tick: the limit counts from this one
	default:
		w.ticks++
		expired = w.ticks >= watchTicks && w.state.CompareAndSwap(s, s-1)
	}
	w.timer.Reset(w.limit / watchTicks)
	w.mu.Unlock()
	if expired {
		w.expire(s / 2)
	}
}

// Stop stops the ticker: an operation running now or later never expires.
func (w *Watch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
