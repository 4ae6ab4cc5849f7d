package engine

import (
	"context"
	"fmt"
	"slices"
)

// joinWaiter is a Join in effect on this rank.
type joinWaiter struct {
	done chan struct{}
	last int
	err  error
}

func (w *joinWaiter) finish(last int, err error) {
	w.last, w.err = last, err
	close(w.done)
}

// Join tells the other ranks that this rank has no more data: until every
// rank has joined, the others' sum and average all-reduces complete
// without it, this rank contributing zeros (it takes part from the
// negotiated shapes, without tensors of its own). An Average still divides
// by the full job size, as Horovod does: a joined rank counts as a zero
// contribution. Other operations that need a joined rank fail with
// ErrJoined. Join returns, on every rank, the last rank to join (the
// highest of those joining in the same cycle). While joined, Submit fails.
// When ctx ends first, Join returns its error but the rank stays joined; a
// later Join waits for the same outcome.
func (e *Engine) Join(ctx context.Context) (lastRank int, err error) {
	e.mu.Lock()
	if e.cause != nil {
		e.mu.Unlock()
		return -1, e.cause
	}
	if e.closing {
		e.mu.Unlock()
		return -1, fmt.Errorf("engine: join on rank %d: %w", e.rank, ErrShutdown)
	}
	w := e.joinWait
	if w == nil {
		w = &joinWaiter{done: make(chan struct{})}
		e.joinWait, e.joinReq = w, w
		e.signal()
	}
	e.mu.Unlock()
	select {
	case <-w.done:
		return w.last, w.err
	case <-ctx.Done():
		return -1, fmt.Errorf("engine: join on rank %d: %w", e.rank, ctx.Err())
	}
}

// completeJoin ends the join once every rank has joined: it clears the
// joined state and returns true with the last rank to join (the highest
// of those joining in the same cycle). Otherwise it remembers who has
// joined so far.
func (n *negotiator) completeJoin(joined []bool) (done bool, last int) {
	if slices.Contains(joined, false) {
		n.prevJoined = joined
		return false, 0
	}
	last = -1
	for r, j := range joined {
		if j && !n.prevJoined[r] {
			last = r
		}
	}
	n.prevJoined = make([]bool, n.size)
	n.joined = false
	return true, last
}

// joinDone returns the Join in effect with the last rank to join.
func (e *Engine) joinDone(last int) {
	e.mu.Lock()
	w := e.joinWait
	e.joinWait = nil
	e.mu.Unlock()
	if w != nil {
		w.finish(last, nil)
	}
}
