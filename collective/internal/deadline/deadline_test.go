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
