package hvd

import (
	"context"
	"fmt"
)

// request is one submitted operation: run executes it on the communicator
// and returns the output tensor (the input for in-place operations).
type request struct {
	name string
	run  func(ctx context.Context) (*Tensor, error)
	h    *Handle
}

// submit queues an operation under a name that must not be in flight.
func (r *Runtime) submit(op, name string, run func(ctx context.Context) (*Tensor, error)) *Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return failedHandle(name, fmt.Errorf("hvd: %s %q: %w", op, name, ErrShutdown))
	}
	if err := r.comm.Err(); err != nil {
		return failedHandle(name, fmt.Errorf("hvd: %s %q: %w", op, name, err))
	}
	if r.inflight[name] {
		return failedHandle(name, fmt.Errorf("hvd: %s %q: %w", op, name, ErrDuplicateName))
	}
	r.inflight[name] = true
	req := &request{name: name, run: run, h: newHandle(name)}
	r.queue <- req // the queue is large; a full one applies back-pressure
	return req.h
}

// execute is the runtime's one goroutine: it runs requests in order and
// fails the remaining ones after Shutdown.
func (r *Runtime) execute() {
	defer close(r.finished)
	for req := range r.queue {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		var out *Tensor
		err := fmt.Errorf("hvd: %q: %w", req.name, ErrShutdown)
		if !closed {
			ctx, cancel := r.opContext()
			out, err = req.run(ctx)
			cancel()
		}
		r.mu.Lock()
		delete(r.inflight, req.name)
		r.mu.Unlock()
		req.h.finish(out, err)
	}
}

func (r *Runtime) opContext() (context.Context, context.CancelFunc) {
	if r.env.OpTimeout > 0 {
		return context.WithTimeout(r.ctx, r.env.OpTimeout)
	}
	return context.WithCancel(r.ctx)
}
