package engine

import (
	"fmt"
	"time"
)

// The engine's timeline hooks; they do nothing without a timeline (on
// ranks other than 0, or when none was configured).

// tlBegin writes, for each task of a batch about to run, its negotiation
// span, opens its operation span and writes the time it queued.
func (e *Engine) tlBegin(batch []*task) {
	if e.tl == nil {
		return
	}
	now := e.now()
	for _, t := range batch {
		e.tl.negotiation(t.resp, t.negotiationStart(), t.ready)
		e.tl.begin(t.resp.name, t.resp.req.Kind.upper(), t.ready)
		e.tl.span(t.resp.name, tlQueue, t.ready, now)
	}
}

// tlNow is the time for a timeline span: the zero time without a
// timeline, which spares the clock reads of a small operation.
func (e *Engine) tlNow() time.Time {
	if e.tl == nil {
		return time.Time{}
	}
	return e.now()
}

// tlSpan writes one activity span on the row of every task in a batch.
func (e *Engine) tlSpan(batch []*task, activity string, from, to time.Time) {
	if e.tl == nil {
		return
	}
	for _, t := range batch {
		e.tl.span(t.resp.name, activity, from, to)
	}
}

// tlEnd closes a task's operation span with its dtype and shape, or its
// error.
func (e *Engine) tlEnd(t *task) {
	if e.tl == nil {
		return
	}
	args := map[string]any{"dtype": t.resp.req.DType.String(), "shape": fmt.Sprint(t.resp.req.Shape)}
	if t.err != nil {
		args["error"] = t.err.Error()
	}
	e.tl.end(t.resp.name, e.now(), args)
}

// negotiationStart is when the first rank submitted the task's name, as
// far as this rank knows.
func (t *task) negotiationStart() time.Time {
	start := earliest(t.resp.seen)
	if t.en != nil && (start.IsZero() || t.en.submitted.Before(start)) {
		start = t.en.submitted
	}
	if start.IsZero() || start.After(t.ready) {
		start = t.ready
	}
	return start
}
