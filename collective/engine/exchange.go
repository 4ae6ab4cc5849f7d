package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// opNegotiation names the negotiation's exchange in errors.
const opNegotiation = "negotiation"

// NoAnswerError reports ranks that did not take part in a negotiation
// exchange: a rank waited for them longer than the limit (they are stopped
// or hung; or, since an engine negotiates only while some rank has work,
// they have submitted nothing while others wait), or their links broke.
// The verdict travels with the exchange, so every rank still exchanging
// fails naming them (a rank frozen in the middle of an exchange may leave
// some ranks naming, beside it, a rank that waited for it past their own
// deadline); errors.Is(err, e.Err) holds.
type NoAnswerError struct {
	Op      string        // "negotiation"
	Rank    int           // the rank reporting the error
	Silent  []int         // ranks that did not answer within Limit, in rank order
	Gone    []int         // ranks whose links broke during the exchange, in rank order
	Limit   time.Duration // how long a rank waits for each answer; 0: no limit
	Pending []string      // the oldest names pending on the reporting rank (a few)
	More    int           // how many more names are pending there
	Err     error         // collective.ErrTimeout (OpTimeout), ErrStall (StallShutdown) or collective.ErrPeerGone
}

// Error says which ranks did not answer, within what limit, and what waits
// here: "engine: negotiation on rank 0: no answer from rank 1 within
// 2s; pending here: [grad/w]: collective: timeout".
func (e *NoAnswerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: %s on rank %d: ", e.Op, e.Rank)
	if len(e.Silent) > 0 {
		fmt.Fprintf(&b, "no answer from %s within %v", rankList(e.Silent), e.Limit)
		if len(e.Gone) > 0 {
			b.WriteString("; ")
		}
	}
	if len(e.Gone) > 0 {
		fmt.Fprintf(&b, "%s left (link broken)", rankList(e.Gone))
	}
	if len(e.Pending) > 0 {
		fmt.Fprintf(&b, "; pending here: %s", nameList(e.Pending, e.More))
	}
	if errors.Is(e.Err, ErrStall) {
		b.WriteString("; " + stallHint)
	}
	return b.String() + ": " + e.Err.Error()
}

// Unwrap returns the sentinel: ErrTimeout, ErrStall or ErrPeerGone.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// rankList prints "rank 1" or "ranks [1 3]".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	return fmt.Sprintf("ranks %v", ranks)
}

// nameList prints names and a count of more: "[a b ... 3 more]".
func nameList(names []string, more int) string {
	s := "[" + strings.Join(names, " ")
	if more > 0 {
		s += fmt.Sprintf(" ... %d more", more)
	}
	return s + "]"
}

// answerLimit returns how long the exchange waits for each hop (see
// collective.AgreeOptions.Limit) and the sentinel a rank fails with when
// some rank misses it, for the given OpTimeout and stall
// shutdown time.
func answerLimit(op, stall time.Duration) (time.Duration, error) {
	switch {
	case op > 0 && (stall <= 0 || op <= stall):
		return op, collective.ErrTimeout
	case stall > 0:
		return stall, ErrStall
	}
	return 0, nil
}

// exchangeWait shows the watchdog the exchange in progress, if any: one
// record per Engine, reused by every exchange (a small step allocates
// nothing for it). The names pending here are read from the negotiator
// only when the watchdog warns (under mu, which the exchange takes when it
// ends), not every cycle: the negotiator leaves them alone while the
// exchange runs.
type exchangeWait struct {
	step atomic.Int32 // the step of Comm.Agree in progress

	mu    sync.Mutex
	seq   uint64      // exchanges published so far, the current one included
	since time.Time   // Engine.now when the current one began
	neg   *negotiator // nil while no exchange is in progress
}

// stalled returns the exchange in progress (its number) with the names
// pending here, if it has waited at least limit at now and is not the
// exchange numbered warned; ok is false otherwise.
func (w *exchangeWait) stalled(now time.Time, limit time.Duration, warned uint64) (seq uint64, waited time.Duration, pending []string, more int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.neg == nil || w.seq == warned {
		return 0, 0, nil, 0, false
	}
	if waited = now.Sub(w.since); waited < limit {
		return 0, 0, nil, 0, false
	}
	pending, more = w.neg.pendingNames(stallNames)
	return w.seq, waited, pending, more, true
}

// ended withdraws the exchange from the watchdog.
func (e *Engine) ended(w *exchangeWait) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.neg = nil
	w.mu.Unlock()
}

// exchange all-reduces the proposal's control vector in place with an
// element-wise Min (Comm.Agree): a rank that does not answer within the
// hop limit (see answerLimit), or whose link breaks, is marked in the
// vector's answer section instead of hanging the others, and every rank
// that takes part ends with the marks that say why (the negotiator's
// verdict, which fails the engine and the Comm). The data of an early
// all-reduce ride with it as the proposal says (AgreeOptions.Rider).
func (e *Engine) exchange(ctx context.Context, p proposal, start time.Time) error {
	limit, _ := answerLimit(e.cfg.OpTimeout, e.cfg.StallShutdown)
	w := e.publishWait(start)
	defer e.ended(w)
	o := collective.AgreeOptions{Op: opNegotiation, Answers: p.answers, Limit: limit}
	if p.rider != nil {
		o.Rider = *p.rider
	}
	if e.realClock { // start is the real time: the hops need not read it again
		o.Start = start
	}
	if w != nil {
		o.Progress = &w.step
	}
	return e.c.Agree(ctx, p.ctl, o)
}

// publishWait shows the exchange about to start (at start) to the
// watchdog; it returns nil when no stall warning is due.
func (e *Engine) publishWait(start time.Time) *exchangeWait {
	if e.cfg.StallWarning <= 0 || e.size == 1 {
		return nil
	}
	w := &e.waiting
	w.step.Store(0)
	w.mu.Lock()
	w.seq++
	w.since, w.neg = start, e.neg
	w.mu.Unlock()
	return w
}
