package engine

import (
	"time"

	"github.com/gorovod/gorovod/collective"
)

// watch is the watchdog goroutine. It notices a negotiation exchange that
// waits for ranks that do not answer: ranks that have submitted nothing
// since every rank was last idle (their engines are not negotiating, so
// the message table cannot name them), or that are stopped or hung. Once
// the exchange has waited the stall warning time it warns, once per
// exchange, with the ranks the exchange waits for and the names pending
// here. Failing is the exchange's own business: each of its hops ends
// after OpTimeout or the stall shutdown time (see Engine.exchange).
func (e *Engine) watch() {
	defer close(e.watchDone)
	limit := e.cfg.StallWarning
	if limit <= 0 {
		return
	}
	tick := time.NewTicker(min(max(limit/4, 5*time.Millisecond), time.Second))
	defer tick.Stop()
	var warned uint64 // the exchange warned about, by number
	for {
		select {
		case <-e.done:
			return
		case <-tick.C:
		}
		w := &e.waiting
		seq, waited, pending, more, ok := w.stalled(e.now(), limit, warned)
		if !ok {
			continue
		}
		warned = seq
		const msg = "engine: negotiation is waiting for ranks that have submitted nothing (or are stopped)"
		args := []any{"missing", w.missing(e.c), "waited", waited.Round(time.Millisecond),
			"tensors", nameList(pending, more), "hint", stallHint}
		e.log.Warn(msg, args...)
		e.stalled(StallWaiting, msg, args)
	}
}

// missing names the ranks the exchange waits for at its current step:
// "rank 1" when the awaited message carries one rank's answer only, "one
// or more of ranks [2 3]" when it would carry several (a rank that waits
// for a silent one cannot answer either).
func (w *exchangeWait) missing(c *collective.Comm) string {
	from := c.AgreeWaitsFor(int(w.step.Load()))
	switch len(from) {
	case 0:
		return "a rank that does not read what this rank sends"
	case 1:
		return rankList(from)
	}
	return "one or more of " + rankList(from)
}
