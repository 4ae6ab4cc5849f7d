package engine

import (
	"context"
	"fmt"
	"time"
)

// turnState is the state of the loop that the holder of the turn owns:
// the engine's goroutine or, while it runs cycles for a handle it waits
// for, a caller of Drive (see Engine.turn).
type turnState struct {
	active   bool      // cycles run until one finds every rank idle
	next     time.Time // when the next cycle is due with nothing new (zero: at once)
	failed   error     // a caller's cycle failed: the loop stops the engine with it
	sleeping bool      // the loop goroutine waits, until sleepEnd if set
	sleepEnd time.Time
	// sleepTimer ends the loop goroutine's sleep at sleepEnd. It is made
	// once and re-armed: by the loop as it goes to sleep, and by a caller
	// of Drive that moved the next cycle later (see release).
	sleepTimer *time.Timer
	driving    bool // the holder is a caller of Drive (counted in Stats.Driven)
}

// run is the engine's goroutine.
func (e *Engine) run(ctx context.Context) {
	defer close(e.done)
	err := e.loop(ctx)
	e.deadline.release()
	if err == nil {
		err = fmt.Errorf("engine: engine on rank %d: %w", e.rank, ErrShutdown)
	}
	e.stopWith(err)
	if e.tl != nil {
		if terr := e.tl.close(); terr != nil {
			e.log.Warn("engine: writing the timeline", "err", terr)
		}
	}
}

// loop runs cycles while any rank has work, and waits for local work while
// every rank is idle. It returns nil after Shutdown, or why it stopped; it
// leaves holding the turn, so no cycle runs after it.
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
//
// Whoever holds the turn runs the cycles that are due: this goroutine, or
// a caller waiting for its own operation (Drive), which saves the two
// goroutine hand-offs of a small blocking operation. Either follows the
// same rules, so the ranks' cycles match whichever goroutine runs them.
func (e *Engine) loop(ctx context.Context) error {
	for {
		<-e.turn
		e.sleeping = false
		if e.failed != nil {
			return e.failed
		}
		if e.stopped() {
			e.due()       // work submitted before Shutdown makes this rank active
			if e.active { // announce: peers stop too
				_ = e.turnCycle(ctx, true)
			}
			return nil
		}
		if e.due() {
			if err := e.turnCycle(ctx, false); err != nil {
				return err
			}
			e.turn <- struct{}{}
			continue
		}
		var ring <-chan time.Time
		e.sleeping, e.sleepEnd = true, time.Time{}
		if e.active {
			e.sleepEnd = e.next
			ring = e.armSleep(time.Until(e.next))
		}
		e.turn <- struct{}{}
		select {
		case <-ring:
		case <-e.wake:
		case <-e.stop:
		}
		if ring != nil {
			e.sleepTimer.Stop()
		}
		e.mu.Lock()
		e.stats.Wakes++
		e.mu.Unlock()
	}
}

// armSleep sets the loop's timer to ring after d and returns its channel.
// A value left from an earlier setting is never received after it
// (time.Timer's Reset, since Go 1.23).
func (e *Engine) armSleep(d time.Duration) <-chan time.Time {
	if e.sleepTimer == nil {
		e.sleepTimer = time.NewTimer(d)
	} else {
		e.sleepTimer.Reset(d)
	}
	return e.sleepTimer.C
}

// due says, to the holder of the turn, whether a cycle should start now:
// while every rank is idle, once something is submitted or joined here;
// while active, when something new waits for the loop or the next cycle
// is due.
func (e *Engine) due() bool {
	e.mu.Lock()
	has := len(e.queue) > 0 || e.joinReq != nil
	if has && !e.active {
		e.setActive(true)
	}
	e.mu.Unlock()
	if !e.active {
		e.active = has
		return has
	}
	return has || !time.Now().Before(e.next)
}

// turnCycle runs one cycle for the holder of the turn and keeps the
// loop's pacing. A stopping cycle's error is not returned: this rank is
// done either way.
func (e *Engine) turnCycle(ctx context.Context, stopping bool) error {
	start := e.now()
	paced := start // cycles are paced by real time, whatever Config.Now says
	if !e.realClock {
		paced = time.Now()
	}
	e.next = paced.Add(e.cycleTime)
	idle, again, err := e.cycle(ctx, start, stopping)
	if again {
		e.next = time.Time{}
	}
	switch {
	case stopping:
		return nil
	case err != nil:
		return err
	case idle:
		e.active = false
		e.mu.Lock()
		e.setActive(false)
		e.mu.Unlock()
	}
	return nil
}

// stopped says whether Shutdown has been called.
func (e *Engine) stopped() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// drive runs the cycles that are due in the calling goroutine until h is
// done, as long as it can take the turn at once; otherwise, or when no
// cycle is due, it leaves the rest to the loop goroutine. Its cycles run
// under the engine's context, never the caller's: a cycle cannot be left
// half done.
func (e *Engine) drive(h *Handle) {
	for {
		if h.fin.Load() {
			return
		}
		select {
		case <-e.turn:
		default:
			e.signal() // the holder may be about to sleep: let the loop look again
			return
		}
		if e.failed != nil || e.stopped() || !e.due() {
			e.release()
			return
		}
		e.driving = true
		if err := e.turnCycle(e.ctx, false); err != nil {
			e.failed = err
		}
		e.driving = false
		e.release()
	}
}

// release hands the turn back after a caller's cycles and wakes the loop
// goroutine when it must look before it would: a failure to stop with,
// work it has not seen, or a cycle due before its timer. When the cycles
// moved the next one later than the loop's timer, it moves the timer
// there too: while callers keep running the cycles themselves, as a
// training loop's blocking operations do one after another, the loop
// goroutine sleeps on instead of waking every cycle time only to find
// nothing due. Each such waking took a processor from the ranks:
// four ranks on the 2-CPU test VM, a blocking 4 KiB hvd.Allreduce after
// a 2-second warm-up, four interleaved launches, took 41-69 µs with a
// cycle time of 1 ms against 29-55 with 100 ms (the bare all-reduce:
// 23-44).
func (e *Engine) release() {
	wake := e.failed != nil || e.sleeping && (e.hasNew() || e.active && (e.sleepEnd.IsZero() || e.next.Before(e.sleepEnd)))
	if !wake && e.sleeping && e.active && e.next.After(e.sleepEnd) { // sleepEnd is set: not waking says so
		e.sleepEnd = e.next
		e.armSleep(time.Until(e.next))
	}
	e.turn <- struct{}{}
	if wake {
		e.signal()
	}
}

// hasNew says whether a submission or a Join waits for the loop.
func (e *Engine) hasNew() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue) > 0 || e.joinReq != nil
}
