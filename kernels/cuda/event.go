//go:build cuda

package cuda

import (
	"fmt"
	"time"

	"gorgonia.org/cu"
)

// Event marks a point in a stream: other streams can wait for it, the host
// can wait for it, and two events give the GPU time between them.
type Event struct {
	c      *Context
	e      cu.Event
	closed bool
}

// NewEvent creates an event with timing enabled.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	err := c.do(func() error {
		var err error
		if e.e, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return driverErr("cuEventCreate", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record enqueues e on s: e completes when the work enqueued on s before it
// has completed. Recording again moves e to the new point.
func (s *Stream) Record(e *Event) error {
	if err := e.check("record"); err != nil {
		return err
	}
	return s.do("record event", func() error {
		if err := e.e.Record(s.s); err != nil {
			return driverErr("cuEventRecord", err)
		}
		return nil
	})
}

// WaitEvent makes the work enqueued on s after this call wait until e (as
// last recorded) completes. The host does not wait.
func (s *Stream) WaitEvent(e *Event) error {
	if err := e.check("wait event"); err != nil {
		return err
	}
	return s.do("wait event", func() error {
		if err := s.s.Wait(e.e, 0); err != nil {
			return driverErr("cuStreamWaitEvent", err)
		}
		return nil
	})
}

// Synchronize waits until e completes.
func (e *Event) Synchronize() error {
	if err := e.check("synchronize event"); err != nil {
		return err
	}
	return e.c.do(func() error {
		if err := e.e.Synchronize(); err != nil {
			return driverErr("cuEventSynchronize", err)
		}
		return nil
	})
}

// Elapsed returns the GPU time from since to e; both must have been
// recorded and completed (resolution about half a microsecond).
func (e *Event) Elapsed(since *Event) (time.Duration, error) {
	if err := e.check("elapsed"); err != nil {
		return 0, err
	}
	if err := since.check("elapsed"); err != nil {
		return 0, err
	}
	var ms float64
	err := e.c.do(func() error {
		var err error
		if ms, err = since.e.Elapsed(e.e); err != nil {
			return driverErr("cuEventElapsedTime", err)
		}
		return nil
	})
	return time.Duration(ms * float64(time.Millisecond)), err
}

// Close destroys e. Closing twice does nothing.
func (e *Event) Close() error {
	if e == nil || e.closed {
		return nil
	}
	return e.c.do(func() error {
		if err := cu.DestroyEvent(&e.e); err != nil {
			return driverErr("cuEventDestroy", err)
		}
		e.closed = true
		return nil
	})
}

// check reports a nil or closed event.
func (e *Event) check(what string) error {
	if e == nil || e.c == nil {
		return fmt.Errorf("%w: %s: nil event", ErrArgument, what)
	}
	if e.closed {
		return fmt.Errorf("%w: %s: event", ErrClosed, what)
	}
	return nil
}
