package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOpDeadline: an operation past OpTimeout runs under a context that
// ends with DeadlineExceeded; the next one gets a live context.
func TestOpDeadline(t *testing.T) {
	d := opDeadline{limit: 20 * time.Millisecond}
	defer d.release()
	ctx := d.arm(t.Context())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an operation past its limit was not ended")
	}
	d.disarm()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("error %v, want context.DeadlineExceeded", ctx.Err())
	}
	next := d.arm(t.Context())
	defer d.disarm()
	if next.Err() != nil {
		t.Fatalf("the next operation's context has ended: %v", next.Err())
	}
}

// TestOpDeadlineUnbounded: with no limit operations run under the
// engine's own context.
func TestOpDeadlineUnbounded(t *testing.T) {
	var d opDeadline
	if ctx := d.arm(t.Context()); ctx != t.Context() {
		t.Fatal("an unbounded operation does not run under the engine's context")
	}
	d.disarm()
	d.release()
}
