package hvd

import (
	"context"
	"fmt"
)

// Handle is an operation in flight. Wait for it to learn its outcome; the
// tensor must not be touched until then.
type Handle struct {
	name string
	done chan struct{}
	err  error
	out  *Tensor
}

func newHandle(name string) *Handle { return &Handle{name: name, done: make(chan struct{})} }

func failedHandle(name string, err error) *Handle {
	h := newHandle(name)
	h.finish(nil, err)
	return h
}

func (h *Handle) finish(out *Tensor, err error) {
	h.out, h.err = out, err
	close(h.done)
}

// Done is closed when the operation has finished.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait blocks until the operation finishes or ctx ends. When ctx ends first
// the operation keeps running; Wait only stops waiting for it.
func (h *Handle) Wait(ctx context.Context) error {
	select {
	case <-h.done:
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
	case <-h.done:
		return h.out
	default:
		return nil
	}
}
