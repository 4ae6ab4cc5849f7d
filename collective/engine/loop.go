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
func (e *Engine) loop(ctx context.Context) error {
	active := false
	var next time.Time
	for {
		if !active {
			if !e.awaitWork() {
				return nil
			}
			active, next = true, time.Now().Add(e.cycleTime)
		}
		stopping := e.sleepUntil(next)
		next = time.Now().Add(e.cycleTime)
		idle, err := e.cycle(ctx, stopping)
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

// sleepUntil waits for the next cycle; it returns true, at once, when
// Shutdown has been called.
func (e *Engine) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-e.stop:
			return true
		default:
			return false
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return false
	case <-e.stop:
		return true
	}
}
