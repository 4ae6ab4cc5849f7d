package hvd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
)

// submit hands a named operation on t to the runtime's engine. out builds
// the handle's Output from the engine's result (data and shape). A driven
// operation is one the caller waits for at once without a deadline: its
// Wait runs the engine's cycles (engine.SubmitDriven).
func (r *Runtime) submit(op string, t *Tensor, req engine.Request, out func(data []byte, shape []int) *Tensor, driven bool) *Handle {
	eh, err := r.submitEngine(op, t, req, driven)
	if err != nil {
		return failedHandle(req.Name, err)
	}
	return &Handle{name: req.Name, eh: eh, result: func() (*Tensor, error) {
		if err := eh.Err(); err != nil {
			return nil, r.wrap(op, req.Name, err)
		}
		return out(eh.Output()), nil
	}}
}

// submitEngine hands the operation to the engine, or says that the
// runtime is shut down.
func (r *Runtime) submitEngine(op string, t *Tensor, req engine.Request, driven bool) (*engine.Handle, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("hvd: %s %q: %w", op, req.Name, ErrShutdown)
	}
	var data []byte
	if t != nil {
		data = t.Data
	}
	if driven {
		return r.engine.SubmitDriven(req, data), nil
	}
	return r.engine.Submit(req, data), nil
}

// runInPlace runs an in-place operation on t that the caller waits for
// without a deadline: the caller drives the engine's cycles, and no
// Handle of hvd's is made (for a small step, its allocations are a good
// part of what the engine adds to the collective).
func (r *Runtime) runInPlace(ctx context.Context, op string, t *Tensor, req engine.Request) error {
	eh, err := r.submitEngine(op, t, req, true)
	if err != nil {
		return err
	}
	if err := eh.Wait(ctx); err != nil {
		return r.wrap(op, req.Name, err)
	}
	return nil
}

// wrap names the operation, tensor and rank of an engine error.
func (r *Runtime) wrap(op, name string, err error) error {
	return fmt.Errorf("hvd: %s %q on %s: %w", op, name, r.where(err), withSentinel(err))
}

// sentinels maps the engine's and collective's sentinels to hvd's: an
// error that matches from gains to (see withSentinel).
var sentinels = []struct{ from, to error }{
	{engine.ErrDuplicateName, ErrDuplicateName},
	{engine.ErrShutdown, ErrShutdown},
	{collective.ErrInvalid, ErrInvalidTensor}, // and so ErrInvalidArgument
	{engine.ErrMismatch, ErrMismatch},
	{engine.ErrStall, ErrStall},
	{collective.ErrTimeout, ErrStall}, // a rank missed OpTimeout: the stall's other limit
	{engine.ErrJoined, ErrJoined},
	{collective.ErrPeerGone, ErrPeerGone},
}

// withSentinel adds hvd's sentinels (ErrDuplicateName, ErrShutdown,
// ErrInvalidTensor, ErrMismatch, ErrStall, ErrJoined, ErrPeerGone) to an
// engine error that has the engine's or collective's, so that callers
// test errors with hvd's alone. A peer's shutdown is ErrShutdown and
// ErrPeerGone. The error reads as before and still matches what it
// matched.
func withSentinel(err error) error {
	var add []error
	for _, s := range sentinels {
		if errors.Is(err, s.from) && !errors.Is(err, s.to) && !slices.Contains(add, s.to) {
			add = append(add, s.to)
		}
	}
	if stoppedByPeerShutdown(err) && !errors.Is(err, ErrPeerGone) {
		add = append(add, ErrPeerGone)
	}
	if len(add) == 0 {
		return err
	}
	return &sentinelError{add, err}
}

// invalidArgument makes err, which reads as it is, match
// ErrInvalidArgument.
func invalidArgument(err error) error {
	return &sentinelError{[]error{ErrInvalidArgument}, err}
}

// sentinelError reads as err and matches err and every one of sentinels.
type sentinelError struct {
	sentinels []error
	err       error
}

func (e *sentinelError) Error() string   { return e.err.Error() }
func (e *sentinelError) Unwrap() []error { return append(slices.Clip(e.sentinels), e.err) }
