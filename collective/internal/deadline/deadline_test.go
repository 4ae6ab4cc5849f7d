package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClock: the context ends with DeadlineExceeded when an armed clock
// passes; a disarmed one ends nothing, so the next Arm reuses it; an
// expired context, or one of another parent, is replaced by a live one;
// the parent's end ends it with the parent's error.
func TestClock(t *testing.T) {
	const d = 20 * time.Millisecond
	parent, cancel := context.WithCancel(t.Context())
	defer cancel()
	var c Clock
	defer c.Release()

	first := c.Arm(parent, d)
	c.Disarm()
	time.Sleep(5 * d)
	if err := first.Err(); err != nil {
		t.Fatalf("a disarmed clock's context ended: %v", err)
	}
	if again := c.Arm(parent, d); again != first {
		t.Fatal("a live context was replaced")
	}
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end when the clock passed")
	}
	if !errors.Is(first.Err(), context.DeadlineExceeded) {
		t.Fatalf("expired context's error %v, want context.DeadlineExceeded", first.Err())
	}
	c.Disarm()
	next := c.Arm(parent, time.Hour)
	if next == first || next.Err() != nil {
		t.Fatalf("after an expiry Arm gave %v (error %v), want a new live context", next, next.Err())
	}
	c.Disarm()
	other := c.Arm(t.Context(), time.Hour)
	if other == next || next.Err() == nil {
		t.Fatal("a context of another parent was reused, or the replaced one left live")
	}
	c.Disarm()
	if c.Arm(parent, time.Hour) == other {
		t.Fatal("a context of another parent was reused")
	}
	cancel()
	<-c.cur.Done()
	if !errors.Is(c.cur.Err(), context.Canceled) {
		t.Fatalf("error after the parent ended: %v, want context.Canceled", c.cur.Err())
	}
}

// TestClockArmUntil: a deadline the running timer already covers (it
// fires no earlier, and at most slack later) reuses the context as it is;
// a later one re-arms it; it ends no earlier than its deadline, with
// DeadlineExceeded; and after it fired between operations the next arming
// hands out a live context.
func TestClockArmUntil(t *testing.T) {
	const d, slack = 60 * time.Millisecond, 20 * time.Millisecond
	parent, cancel := context.WithCancel(t.Context())
	defer cancel()
	var c Clock
	defer c.Release()

	start := time.Now()
	first := c.ArmUntil(parent, start.Add(d), slack)
	if again := c.ArmUntil(parent, start.Add(d+slack/4), slack); again != first {
		t.Fatal("a deadline the timer covers re-made the context")
	}
	later := c.ArmUntil(parent, start.Add(3*d), slack)
	if later != first {
		t.Fatal("re-arming a live clock made a new context")
	}
	select {
	case <-later.Done():
		t.Fatalf("the context ended after %v, before its deadline %v", time.Since(start), 3*d)
	case <-time.After(2 * d):
	}
	<-later.Done()
	if waited := time.Since(start); waited < 3*d {
		t.Fatalf("ended after %v, before the deadline %v", waited, 3*d)
	}
	if !errors.Is(later.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", later.Err())
	}
	next := c.ArmUntil(parent, time.Now().Add(d), slack)
	if next == later || next.Err() != nil {
		t.Fatalf("after the timer fired, ArmUntil gave %v (err %v), want a new live context", next, next.Err())
	}
}
