package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/kernels"
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
	Err     error         // ErrTimeout (OpTimeout), ErrStall (StallShutdown) or ErrPeerGone
}

// Error says which ranks did not answer, within what limit, and what waits
// here: "collective: negotiation on rank 0: no answer from rank 1 within
// 2s; pending here: [grad/w]: collective: timeout".
func (e *NoAnswerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collective: %s on rank %d: ", e.Op, e.Rank)
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

// answerLimit returns how long the exchange waits for each hop (see hop)
// and the sentinel a rank fails with when some rank misses it: OpTimeout
// and ErrTimeout, or the stall shutdown time and ErrStall when that is
// shorter or OpTimeout is 0. A limit of 0 means waiting without a bound.
func (e *Engine) answerLimit() (time.Duration, error) {
	op, stall := e.cfg.OpTimeout, e.cfg.StallShutdown
	switch {
	case op > 0 && (stall <= 0 || op <= stall):
		return op, ErrTimeout
	case stall > 0:
		return stall, ErrStall
	}
	return 0, nil
}

// exchangeWait is where an exchange in progress waits, for the watchdog.
// Only step changes after it is published.
type exchangeWait struct {
	since   time.Time    // Engine.now when the exchange began
	hops    []hop        // the steps' hops
	step    atomic.Int32 // the step in progress
	pending []string     // the oldest names pending on this rank
	more    int          // how many more are pending
}

// exchangeState is the exchange's part of the loop's state.
type exchangeState struct {
	hops    []hop // this rank's hops, from exchangeHops
	hopsErr error
	scratch []byte // a received vector before it is folded in
	min     kernels.ReduceFunc
}

// initExchange derives the hops of this rank's exchange once: they depend
// on the size only.
func (e *Engine) initExchange() {
	e.xs.min, _ = kernels.Lookup(kernels.U8, kernels.Min)
	plans := make([]*plan, e.size)
	for r := range plans {
		p, err := newPlan(RecursiveDoublingAllreduce(r, e.size, 1), r, e.size)
		if err != nil {
			e.xs.hopsErr = err
			return
		}
		plans[r] = p
	}
	e.xs.hops, e.xs.hopsErr = exchangeHops(plans, e.rank)
}

// exchange all-reduces the control vector with an element-wise Min by
// recursive doubling, as Comm.Allreduce would, except that a rank that does
// not answer cannot hang the others. Step i's Send and Recv must end by
// start + hops[i].budget·limit (see answerLimit and hop). A peer that
// misses that deadline, or whose link breaks, is marked in the vector's
// answer section, which travels on with the vector; its part is left out
// and it is skipped from then on, as is any peer marked by another rank.
// So every rank that takes part finishes the exchange, and every rank whose
// result lacks a contribution holds the marks that say why: the verdict,
// which fails the engine and the Comm (see verdict). A failure of this rank
// itself (ctx ended, the Comm failed or closed, a bad frame) fails the Comm
// as any operation does.
func (e *Engine) exchange(ctx context.Context) error {
	c := e.c
	seq, err := c.begin(opNegotiation)
	if err != nil {
		return err
	}
	defer c.end()
	v := e.ctl.b
	p, err := c.getPlan(planKey{alg: opNegotiation, count: len(v), esz: 1}, func() []Step {
		return RecursiveDoublingAllreduce(e.rank, e.size, len(v))
	})
	switch {
	case err != nil:
		return c.invalid(opNegotiation, seq, "%v", err)
	case e.xs.hopsErr != nil:
		return c.invalid(opNegotiation, seq, "%v", e.xs.hopsErr)
	case len(p.steps) != len(e.xs.hops):
		return c.invalid(opNegotiation, seq, "%d steps but %d hops", len(p.steps), len(e.xs.hops))
	}
	if cap(e.xs.scratch) < len(v) {
		e.xs.scratch = make([]byte, len(v))
	}
	limit, _ := e.answerLimit()
	start := time.Now()
	w := e.publishWait()
	defer e.waiting.Store(nil)
	for i := range p.steps {
		if w != nil {
			w.step.Store(int32(i))
		}
		hctx, cancel := hopContext(ctx, start, e.xs.hops[i].budget, limit)
		err := e.hopStep(ctx, hctx, seq, p, i)
		cancel()
		if err != nil {
			c.fail(err)
			return c.Err()
		}
	}
	return e.verdict(seq)
}

// hopContext is ctx with the deadline of a hop of the given budget; with
// no limit it is ctx itself.
func hopContext(ctx context.Context, start time.Time, budget int, limit time.Duration) (context.Context, context.CancelFunc) {
	if limit <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, start.Add(time.Duration(budget)*limit))
}

// hopStep runs step i of the exchange under hctx: it sends the vector and
// receives and folds in the peer's, skipping peers already marked. It
// returns only failures of this rank, as *OpError.
func (e *Engine) hopStep(ctx, hctx context.Context, seq uint64, p *plan, i int) error {
	st, v := p.steps[i], e.ctl.b
	if st.SendTo >= 0 && e.ctl.answered(st.SendTo) {
		err := e.c.t.Conn(st.SendTo).Send(hctx, Tag{Seq: seq, Step: p.sendTag[i]}, v[st.Send.Off:st.Send.end()])
		if err := e.settle(ctx, hctx, seq, i, st.SendTo, err); err != nil {
			return err
		}
	}
	if st.RecvFrom < 0 || !e.ctl.answered(st.RecvFrom) {
		return nil
	}
	dst := v[st.Recv.Off:st.Recv.end()]
	into := dst
	if st.Combine == Reduce {
		into = e.xs.scratch[:len(dst)]
	}
	err := e.c.t.Conn(st.RecvFrom).Recv(hctx, Tag{Seq: seq, Step: p.recvTag[i]}, into)
	if err != nil {
		return e.settle(ctx, hctx, seq, i, st.RecvFrom, err)
	}
	if st.Combine == Reduce {
		e.xs.min(dst, into)
	}
	return nil
}

// settle sorts out a Send or Recv error of step i with peer: a missed hop
// deadline or a broken link is marked against the peer and the exchange
// goes on; anything else (ctx ended, this rank's Comm failed or closed, a
// protocol error) is this rank's failure.
func (e *Engine) settle(ctx, hctx context.Context, seq uint64, i, peer int, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil || e.c.Err() != nil || errors.Is(err, ErrClosed):
	case hctx.Err() != nil:
		e.ctl.lowerAnswer(peer, answerSilent)
		return nil
	case errors.Is(err, ErrPeerGone):
		e.ctl.lowerAnswer(peer, answerGone)
		return nil
	}
	return &OpError{Op: opNegotiation, Seq: seq, Step: i, Rank: e.rank, Peer: peer, Host: e.c.t.Host(peer), Err: err}
}

// verdict reads the answer section of the exchanged vector. If some rank
// found a rank silent or gone, this rank stops with a *NoAnswerError naming
// them, and fails the Comm with it, so that the silent ranks' links close
// and every later operation here fails with the same cause.
func (e *Engine) verdict(seq uint64) error {
	silent, gone := e.ctl.unanswered()
	if silent == nil && gone == nil {
		return nil
	}
	limit, sentinel := e.answerLimit()
	if silent == nil {
		sentinel = ErrPeerGone
	}
	names, more := e.pendingNames(stallNames)
	err := &NoAnswerError{Op: opNegotiation, Rank: e.rank, Silent: silent, Gone: gone, Limit: limit,
		Pending: names, More: more, Err: sentinel}
	e.c.fail(err)
	e.log.Debug("collective: negotiation: ranks did not answer", "seq", seq, "err", err)
	return err
}

// publishWait shows the exchange about to start to the watchdog, with the
// oldest names pending here; it returns nil when no stall warning is due.
func (e *Engine) publishWait() *exchangeWait {
	if e.cfg.StallWarning <= 0 || len(e.xs.hops) == 0 {
		return nil
	}
	w := &exchangeWait{since: e.now(), hops: e.xs.hops}
	w.pending, w.more = e.pendingNames(stallNames)
	e.waiting.Store(w)
	return w
}

// pendingNames returns the k oldest names pending on this rank, oldest
// first, and how many more there are.
func (e *Engine) pendingNames(k int) ([]string, int) {
	oldest := make([]*entry, 0, k+1)
	for _, en := range e.pending {
		at := len(oldest)
		for at > 0 && oldest[at-1].seq > en.seq {
			at--
		}
		if at < k {
			oldest = slices.Insert(oldest, at, en)[:min(len(oldest)+1, k)]
		}
	}
	names := make([]string, len(oldest))
	for i, en := range oldest {
		names[i] = en.req.Name
	}
	return names, len(e.pending) - len(names)
}
