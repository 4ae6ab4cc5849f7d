package deadline

import (
	"sync/atomic"
	"testing"
	"time"
)

// expiries records the operations a Watch expired and when.
type expiries struct {
	n    atomic.Int64
	last atomic.Uint64
	at   chan time.Time
}

func newExpiries() *expiries { return &expiries{at: make(chan time.Time, 16)} }

func (e *expiries) expire(op uint64) {
	e.n.Add(1)
	e.last.Store(op)
	e.at <- time.Now()
}

// TestWatchExpiresLongOperation: an operation still running at the limit
// expires, once, between the limit and 9/8 of it (plus the scheduling
// slack of a loaded machine); End then says so, and the next operation
// starts afresh.
func TestWatchExpiresLongOperation(t *testing.T) {
	const limit = 80 * time.Millisecond
	e := newExpiries()
	w := NewWatch(limit, e.expire)
	defer w.Stop()
	start := time.Now()
	w.Begin(7)
	var at time.Time
	select {
	case at = <-e.at:
	case <-time.After(10 * time.Second):
		t.Fatal("the operation did not expire")
	}
	if took := at.Sub(start); took < limit || took > limit*9/8+2*time.Second {
		t.Errorf("expired %v after it began; want between %v and about %v", took, limit, limit*9/8)
	}
	if e.last.Load() != 7 {
		t.Errorf("expired operation %d, want 7", e.last.Load())
	}
	time.Sleep(limit / 2) // more ticks: no second expiry of the same operation
	if !w.End(7) {
		t.Error("End did not report the expiry")
	}
	if n := e.n.Load(); n != 1 {
		t.Errorf("%d expiries, want 1", n)
	}
	w.Begin(8)
	if w.End(8) {
		t.Error("an operation that ended at once expired")
	}
}

// TestWatchSparesShortOperations: operations that each end at once, one
// after another for several limits, and idle spells past the limit,
// never expire.
func TestWatchSparesShortOperations(t *testing.T) {
	const limit = 40 * time.Millisecond
	e := newExpiries()
	w := NewWatch(limit, e.expire)
	defer w.Stop()
	op := uint64(0)
	for start := time.Now(); time.Since(start) < 8*limit; {
		op++
		w.Begin(op)
		if w.End(op) {
			t.Fatalf("operation %d expired", op)
		}
	}
	time.Sleep(2 * limit)
	op++
	w.Begin(op)
	if w.End(op) || e.n.Load() != 0 {
		t.Errorf("after an idle spell: %d expiries", e.n.Load())
	}
}

// TestWatchStop: after Stop no operation expires, however long it runs.
func TestWatchStop(t *testing.T) {
	const limit = 20 * time.Millisecond
	e := newExpiries()
	w := NewWatch(limit, e.expire)
	w.Begin(1)
	w.End(1)
	w.Stop()
	w.Begin(2)
	time.Sleep(5 * limit)
	if w.End(2) || e.n.Load() != 0 {
		t.Errorf("an operation after Stop expired (%d expiries)", e.n.Load())
	}
}
