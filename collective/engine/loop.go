package engine

import (
	"context"
	"fmt"
	"time"
)

// run is the engine's goroutine.
func (e *Engine) run(ctx context.Context) {
	defer close(e.done)
	err := e.loop(ctx)
	if err == nil {
		err = fmt.Errorf("collective: engine on rank %d: %w", e.rank, ErrShutdown)
	}
	e.stopWith(err)
	if e.tl != nil {
		if terr := e.tl.close(); terr != nil {
			e.log.Warn("collective: writing the timeline", "err", terr)
		}
	}
}

// loop runs cycles while any rank has work, and waits for local work while
// every rank is idle. It returns nil after Shutdown, or why it stopped.
//
// A cycle starts at once when this rank has something new to negotiate:
// the first submission after an idle spell, or one that arrived since the
// last cycle began, or when some rank took something new into the last
// cycle and this rank still has requests that are not ready everywhere
// (its peers, a little behind, may be about to submit them: waiting in the
// next cycle's exchange costs nothing, while waiting out a cycle time
// would delay them). Otherwise it starts a cycle time after the last one.
// So a training step's gradients are negotiated as they come, and those
// that arrive while a cycle runs are fused into the next; ranks that
// submit in different orders retry once at once and then every cycle
// time, instead of spinning. Cycles are collective: a rank that starts one
// early waits in it for the others.
func (e *Engine) loop(ctx context.Context) error {
	active := false
	var next time.Time
	for {
		stopping := false
		if active {
			stopping = e.pause(next)
		} else {
			if !e.awaitWork() {
				return nil
			}
			active = true
		}
		next = time.Now().Add(e.cycleTime)
		idle, again, err := e.cycle(ctx, stopping)
		if again {
			next = time.Time{}
		}
		switch {
		case stopping: // announced (or failed trying): this rank is done
			return nil
		case err != nil:
			return err
		case idle:
			active = false
			e.mu.Lock()
			e.setActive(false)
			e.mu.Unlock()
		}
	}
}

// awaitWork waits until something is submitted or joined; it returns false
// if Shutdown comes first.
func (e *Engine) awaitWork() bool {
	for {
		e.mu.Lock()
		has := len(e.queue) > 0 || e.joinReq != nil
		if has {
			e.setActive(true)
		}
		e.mu.Unlock()
		if has {
			return true
		}
		select {
		case <-e.wake:
		case <-e.stop:
			return false
		}
	}
}

// pause waits until t, or until something is submitted or joined that
// the loop has not taken yet; it returns true, at once, when Shutdown has
// been called.
func (e *Engine) pause(t time.Time) bool {
	for {
		select {
		case <-e.stop:
			return true
		default:
		}
		d := time.Until(t)
		if d <= 0 || e.hasNew() {
			return false
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			return false
		case <-e.stop:
			timer.Stop()
			return true
		case <-e.wake: // look at the queue again: the token may be stale
			timer.Stop()
		}
	}
}

// hasNew says whether a submission or a Join waits for the loop.
func (e *Engine) hasNew() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue) > 0 || e.joinReq != nil
}
