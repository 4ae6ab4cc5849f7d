package engine

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Handle is an operation submitted to an Engine. Its buffer must not be
// touched until Done is closed.
type Handle struct {
	e     *Engine // nil for a handle failed at submission
	name  string
	err   error
	out   []byte
	shape []int
	// fin is set once out, shape and err are final. done is Done's
	// channel, made only when somebody asks for it (a blocking call that
	// drives its own cycle never does); finish swaps in closedDone.
	fin  atomic.Bool
	done atomic.Pointer[chan struct{}]
	en   entry  // the engine's record of the operation (one allocation for both)
	dims [2]int // storage for the request's shape when it has no more dimensions
}

// closedDone is the Done channel of every finished handle that had none.
var closedDone = func() *chan struct{} {
	c := make(chan struct{})
	close(c)
	return &c
}()

func newHandle(name string) *Handle { return &Handle{name: name} }

func (h *Handle) finish(out []byte, shape []int, err error) {
	h.out, h.shape, h.err = out, shape, err
	h.fin.Store(true)
	if c := h.done.Swap(closedDone); c != nil && c != closedDone {
		close(*c)
	}
}

// Name is the tensor name the operation was submitted under.
func (h *Handle) Name() string { return h.name }

// Done is closed when the operation has finished.
func (h *Handle) Done() <-chan struct{} {
	if h.fin.Load() {
		// Finished: closed, even in the moment before finish closes a
		// channel that an earlier Done made, so that a caller who has
		// seen the operation end (Wait returned) finds Done closed.
		return *closedDone
	}
	if c := h.done.Load(); c != nil {
		return *c
	}
	c := make(chan struct{})
	if h.done.CompareAndSwap(nil, &c) {
		return c
	}
	return *h.done.Load() // another Done's channel, or closedDone
}

// Err is the operation's outcome once Done is closed (nil before).
func (h *Handle) Err() error {
	if h.fin.Load() {
		return h.err
	}
	return nil
}

// Wait blocks until the operation finishes or ctx ends, and returns its
// outcome or ctx's error. When ctx ends first the operation keeps running.
// With a ctx that never ends it first drives the engine (see Drive).
func (h *Handle) Wait(ctx context.Context) error {
	if ctx.Done() == nil {
		h.Drive()
	}
	if h.fin.Load() { // usually, after Drive: the caller's own cycle finished it
		return h.err
	}
	select {
	case <-h.Done():
		return h.err
	case <-ctx.Done():
		return fmt.Errorf("engine: waiting for %q: %w", h.name, ctx.Err())
	}
}

// Output is the result and its shape once the operation succeeded: the
// submitted buffer for all-reduce and broadcast, a new buffer for
// all-gather, all-to-all and reduce-scatter. It is nil before, on failure,
// and for a barrier.
func (h *Handle) Output() (data []byte, shape []int) {
	if h.fin.Load() {
		return h.out, h.shape
	}
	return nil, nil
}

// Drive runs the engine's cycles that are due in the calling goroutine,
// while the operation is not done and no other goroutine runs them, and
// returns when the operation is done or when it leaves the rest to the
// engine's goroutine (another goroutine runs cycles, or none is due yet).
// A caller that is about to wait for the handle saves the hand-offs to
// and from that goroutine, which cost a small operation several times its
// collectives. A cycle waits for every rank, as the operation does; call
// Drive only where the caller would wait without a deadline.
func (h *Handle) Drive() {
	if h.e != nil {
		h.e.drive(h)
	}
}
