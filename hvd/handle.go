package hvd

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective/engine"
)

// Handle is an operation in flight. Wait for it to learn its outcome; the
// tensor must not be touched until then.
type Handle struct {
	name   string
	eh     *engine.Handle          // the engine's operation; nil for a handle failed at once
	done   <-chan struct{}         // closed already, where eh is nil
	result func() (*Tensor, error) // called once, after the operation is done
	once   sync.Once
	out    *Tensor
	err    error
}

// failedHandle is a handle that has already failed with err.
func failedHandle(name string, err error) *Handle {
	done := make(chan struct{})
	close(done)
	return &Handle{name: name, done: done, result: func() (*Tensor, error) { return nil, err }}
}

// settle computes the outcome once the operation is done.
func (h *Handle) settle() {
	h.once.Do(func() { h.out, h.err = h.result() })
}

// Done is closed when the operation has finished.
func (h *Handle) Done() <-chan struct{} {
	if h.eh != nil {
		return h.eh.Done()
	}
	return h.done
}

// Wait blocks until the operation finishes or ctx ends. When ctx ends first
// the operation keeps running; Wait only stops waiting for it. With a ctx
// that cannot end (context.Background), the waiting goroutine runs the
// engine's negotiation cycles itself while no other goroutine does, which
// spares a small operation two goroutine hand-offs.
func (h *Handle) Wait(ctx context.Context) error {
	if ctx.Done() == nil && h.eh != nil {
		h.eh.Wait(ctx) // drives the cycles; ctx cannot end, so it returns once done
		h.settle()
		return h.err
	}
	select {
	case <-h.Done():
		h.settle()
		return h.err
	case <-ctx.Done():
		return fmt.Errorf("hvd: waiting for %q: %w", h.name, ctx.Err())
	}
}

// Output is the result tensor of operations that produce a new one
// (all-gather, reduce-scatter, all-to-all); for in-place operations it is
// the input tensor. It is nil until the operation succeeded.
func (h *Handle) Output() *Tensor {
	select {
	case <-h.Done():
		h.settle()
		if h.err != nil {
			return nil
		}
		return h.out
	default:
		return nil
	}
}
