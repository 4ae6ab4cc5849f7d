package collective

import (
	"fmt"
	"time"
)

// inspect runs the stall inspector over the message table after a cycle:
// rank 0 logs a warning naming the missing ranks; past the shutdown time
// this rank asks every rank, in the next cycle, to stop.
func (e *Engine) inspect(joined []bool) {
	if e.table.len() == 0 {
		return
	}
	rep := e.stall.check(e.now(), e.table.waiting(), joined)
	if rep == nil {
		return
	}
	if rep.warn && e.rank == 0 {
		e.log.Warn("collective: stalled tensors: some ranks submitted tensors that other ranks have not",
			"tensors", rep.tensors, "waited", rep.oldest.Round(time.Millisecond), "missing", rep.ranks(), "hint", stallHint)
	}
	if rep.shutdown {
		e.abortNext = true
	}
}

// watch is the watchdog goroutine: it notices a negotiation that waits
// for ranks that are not negotiating at all (they submitted nothing, so
// the message table cannot name them), warns after the stall warning time
// and fails the Comm after the stall shutdown time.
func (e *Engine) watch() {
	defer close(e.watchDone)
	limit := e.stall.threshold()
	if limit <= 0 {
		return
	}
	tick := time.NewTicker(min(max(limit/4, 5*time.Millisecond), time.Second))
	defer tick.Stop()
	var warned int64
	for {
		select {
		case <-e.done:
			return
		case <-tick.C:
		}
		since := e.waitSince.Load()
		if since == 0 {
			continue
		}
		waited := e.now().Sub(time.Unix(0, since))
		if w := e.cfg.StallWarning; w > 0 && waited >= w && warned != since {
			warned = since
			e.log.Warn("collective: negotiation is waiting for ranks that have submitted nothing",
				"waited", waited.Round(time.Millisecond), "hint", stallHint)
		}
		if s := e.cfg.StallShutdown; s > 0 && waited >= s {
			e.c.Abort(fmt.Errorf("%w: rank %d waited %v for the other ranks to negotiate; shutting down: %s",
				ErrStall, e.rank, waited.Round(time.Millisecond), stallHint))
			return
		}
	}
}
