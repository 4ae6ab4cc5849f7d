package deadline

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock hands out a context that ends, with context.DeadlineExceeded as
// its error, when the deadline it was armed with passes. The zero Clock is
// ready; it is not safe for concurrent use.
type Clock struct {
	cur *expiring // nil until first armed
}

// expiring is a context.WithCancel of its parent that its timer ends with
// context.DeadlineExceeded.
type expiring struct {
	context.Context
	parent  context.Context
	cancel  context.CancelFunc
	expired atomic.Bool
	timer   *time.Timer
	at      time.Time // when the timer fires, as ArmUntil set it; zero otherwise
}

// Err is context.DeadlineExceeded once the timer fired, as for a
// context.WithDeadline (transports report collective.ErrTimeout for it).
func (x *expiring) Err() error {
	err := x.Context.Err()
	if err != nil && x.expired.Load() {
		return context.DeadlineExceeded
	}
	return err
}

func (x *expiring) expire() {
	x.expired.Store(true)
	x.cancel()
}

// Arm starts a clock of d and returns the context to run under until
// Disarm: a child of parent that ends when d passes (or parent ends). The
// context of the previous arming is returned again unless it expired or
// had another parent; a context that expired is never reused, even when
// its operation finished just as it fired.
func (c *Clock) Arm(parent context.Context, d time.Duration) context.Context {
	if x := c.cur; x != nil && x.parent == parent && !x.expired.Load() {
		x.timer.Reset(d)
		x.at = time.Time{}
		return x
	}
	c.Release()
	ctx, cancel := context.WithCancel(parent)
	x := &expiring{Context: ctx, parent: parent, cancel: cancel}
	x.timer = time.AfterFunc(d, x.expire)
	c.cur = x
	return x
}

// Disarm stops the clock; the context stays live for the next Arm.
func (c *Clock) Disarm() {
	if c.cur != nil {
		c.cur.timer.Stop()
		c.cur.at = time.Time{}
	}
}

// ArmUntil is Arm for operations that each must end by a deadline, for a
// caller that arms the clock operation after operation without
// disarming it: it leaves the timer alone while it fires no earlier than
// deadline and no later than deadline+slack, so that it is re-armed only
// about every slack instead of every operation. The context it returns
// ends at the earliest at deadline; a timer that fires between
// operations ends that context, and the next arming makes a new one.
func (c *Clock) ArmUntil(parent context.Context, deadline time.Time, slack time.Duration) context.Context {
	x := c.cur
	live := x != nil && x.parent == parent && !x.expired.Load()
	if live && !x.at.IsZero() && !x.at.Before(deadline) && x.at.Sub(deadline) <= slack {
		return x
	}
	at := deadline.Add(slack / 2)
	// The timer runs between operations: one that fires as it is re-armed
	// must not end the context handed out now. Stop says whether it did.
	if live && x.timer.Stop() {
		x.timer.Reset(time.Until(at))
		x.at = at
		return x
	}
	c.Release()
	ctx := c.Arm(parent, time.Until(at))
	c.cur.at = at
	return ctx
}

// Release ends the context and frees its timer; the next Arm makes a new
// one.
func (c *Clock) Release() {
	if x := c.cur; x != nil {
		x.timer.Stop()
		x.cancel()
		c.cur = nil
	}
}
