package collective

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// Answer codes of an Agree vector's answer section (one byte per rank),
// ordered so that Min keeps the worst code any rank recorded.
const (
	AnswerSilent byte = 0 // did not answer within the hop limit
	AnswerGone   byte = 1 // its link broke during the exchange
	AnswerOK     byte = 2 // answered (or nobody waited for it in vain)
)

// AgreeOptions configure Comm.Agree.
type AgreeOptions struct {
	// Op names the operation in errors ("agree" when empty).
	Op string
	// Answers is the offset in the vector of its answer section: Size
	// bytes, one per rank, each AnswerOK on entry.
	Answers int
	// Limit is the hop limit: step i of this rank must end by
	// start + budget(i)·Limit (see hop). 0 waits without a bound.
	Limit time.Duration
	// Start is when the exchange began, for the hop deadlines (zero: now);
	// a caller that has just read the clock saves a read.
	Start time.Time
	// Progress, if set, receives the index of each step as it starts, so
	// a watchdog can ask AgreeWaitsFor which ranks the exchange waits for.
	Progress *atomic.Int32
	// Rider, when its Reduce is set, is data that travel with the
	// agreement and are reduced with Reduce instead of Min (the engine's
	// early all-reduce).
	Rider AgreeRider
}

// AgreeRider is data that ride with an Agree's vector, reduced by
// recursive doubling as an Allreduce of up to Options.InlineBytes reduces
// them, bit for bit, with a function of their own. A rank marked silent or
// gone leaves its part out, as for the rest of the vector.
type AgreeRider struct {
	// Reduce reduces the data; nil: there are none.
	Reduce kernels.ReduceFunc
	// At is the offset in the vector from which it is reduced with Reduce
	// instead of Min: the data lie in the vector's tail. It must not
	// overlap the answer section.
	At int
	// Apart, when set, carries the data in a buffer of their own instead
	// of the vector's tail (At is then ignored and all of the vector is
	// reduced with Min): the message is the vector followed by Apart,
	// gathered by the link where it can, so the data need not be copied in
	// and out of the vector. Apart is reduced in place only if the
	// vector's byte at If reads 1 after the Min, which every rank sees
	// alike; otherwise it is left as it was. Reducing in place is safe
	// only once every rank's say is known, that is after the last step, so
	// Apart needs an exchange of one step: a job of two ranks.
	Apart []byte
	If    int
}

// Agree all-reduces v (uint8) with an element-wise Min by recursive
// doubling, as Allreduce would, except that a rank that does not answer
// cannot hang the others. A peer that misses its hop's deadline, or whose
// link breaks, is marked in v's answer section (AnswerSilent, AnswerGone),
// which travels on with v; its part is left out and it is skipped from
// then on, as is any peer that another rank marked. So every rank that
// takes part finishes, and every rank whose result lacks a contribution
// holds the marks that say why; what to do about them is the caller's
// (see Abort). A failure of this rank itself (ctx ended, the Comm failed
// or closed, a bad frame) fails the Comm as any operation does.
func (c *Comm) Agree(ctx context.Context, v []byte, o AgreeOptions) error {
	op := o.Op
	if op == "" {
		op = "agree"
	}
	seq, err := c.begin(op)
	if err != nil {
		return err
	}
	defer c.end()
	a, err := c.agreePlan(op, seq, len(v), o.Answers)
	if err != nil {
		return err
	}
	x := agreeRun{c: c, op: op, seq: seq, p: a.p, v: v, answers: o.Answers, tail: len(v)}
	x.min, _ = kernels.Lookup(kernels.U8, kernels.Min)
	if err := x.carry(o.Rider, len(v), o.Answers); err != nil {
		return err
	}
	x.scratch = c.scratchBuffers(1, len(v)+len(x.data))[0]
	start := o.Start
	if start.IsZero() && o.Limit > 0 {
		start = time.Now()
	}
	for i := range a.p.steps {
		if o.Progress != nil {
			o.Progress.Store(int32(i))
		}
		hctx := c.hopContext(ctx, start, a.hops[i].budget, o.Limit)
		err := x.step(ctx, hctx, i)
		if err != nil {
			c.fail(err)
			return c.Err()
		}
	}
	return nil
}

// carry sets up the run to carry r, checked against a vector of n bytes
// with its answer section at answers.
func (x *agreeRun) carry(r AgreeRider, n, answers int) error {
	c, size := x.c, x.c.Size()
	switch {
	case r.Apart != nil && (r.Reduce == nil || size != 2 || r.If < 0 || r.If >= n):
		return c.invalid(x.op, x.seq, "separate data need a reduction, a job of two ranks and a flag within the vector of %d bytes (ranks %d, flag at %d)", n, size, r.If)
	case r.Apart != nil:
		x.data, x.dataIf, x.reduce = r.Apart, r.If, r.Reduce
	case r.Reduce != nil:
		if r.At < answers+size || r.At > n {
			return c.invalid(x.op, x.seq, "tail at %d overlaps the answer section [%d, %d) or lies outside a vector of %d bytes", r.At, answers, answers+size, n)
		}
		x.tail, x.reduce = r.At, r.Reduce
	}
	return nil
}

// agreeSchedule is a prepared Agree: this rank's plan and hops.
type agreeSchedule struct {
	p    *plan
	hops []hop
}

// lastAgree is the schedule of the Comm's last Agree, and the vector
// length it is for.
type lastAgree struct {
	count int
	agreeSchedule
}

// agreePlan returns the plan and hops of an Agree over count bytes with
// its answer section at answers, checking both.
func (c *Comm) agreePlan(op string, seq uint64, count, answers int) (agreeSchedule, error) {
	rank, size := c.Rank(), c.Size()
	if answers < 0 || answers+size > count {
		return agreeSchedule{}, c.invalid(op, seq, "answer section [%d, %d) outside a vector of %d bytes", answers, answers+size, count)
	}
	if last := c.lastAgree; last.p != nil && last.count == count {
		return last.agreeSchedule, nil // the engine agrees on a vector of one length cycle after cycle
	}
	p, err := c.getPlan(planKey{alg: "agree", count: count, esz: 1}, func() []Step {
		return RecursiveDoublingAllreduce(rank, size, count)
	})
	if err != nil {
		return agreeSchedule{}, c.invalid(op, seq, "%w", err)
	}
	hops, err := c.agreeHops()
	switch {
	case err != nil:
		return agreeSchedule{}, c.invalid(op, seq, "%w", err)
	case len(p.steps) != len(hops):
		return agreeSchedule{}, c.invalid(op, seq, "%d steps but %d hops", len(p.steps), len(hops))
	}
	c.lastAgree = lastAgree{count: count, agreeSchedule: agreeSchedule{p: p, hops: hops}}
	return c.lastAgree.agreeSchedule, nil
}

// agreeHops derives this rank's hops once: they depend on the size only.
func (c *Comm) agreeHops() ([]hop, error) {
	c.hopsOnce.Do(func() {
		size := c.Size()
		plans := make([]*plan, size)
		for r := range plans {
			p, err := newPlan(RecursiveDoublingAllreduce(r, size, 1), r, size)
			if err != nil {
				c.hopsErr = err
				return
			}
			plans[r] = p
		}
		c.hops, c.hopsErr = exchangeHops(plans, c.Rank())
	})
	return c.hops, c.hopsErr
}

// AgreeWaitsFor returns the ranks whose contributions step of this rank's
// Agree waits for and that it has not heard from yet, in rank order (empty
// when the step receives nothing, or step is out of range).
func (c *Comm) AgreeWaitsFor(step int) []int {
	hops, err := c.agreeHops()
	if err != nil || step < 0 || step >= len(hops) {
		return nil
	}
	return hops[step].from
}

// hopContext is ctx with the deadline of a hop of the given budget, from
// the Comm's re-armed clock (see deadline.Clock: the engine agrees every
// cycle under one context); with no limit it is ctx itself. The deadline
// may pass up to an eighth of the hop's time late, which lets the clock
// go without re-arming for cycle after cycle (ArmUntil).
func (c *Comm) hopContext(ctx context.Context, start time.Time, budget int, limit time.Duration) context.Context {
	if limit <= 0 {
		return ctx
	}
	d := time.Duration(budget) * limit
	return c.hopClock.ArmUntil(ctx, start.Add(d), d/8)
}

// agreeRun is one Agree in progress.
type agreeRun struct {
	c       *Comm
	op      string
	seq     uint64
	p       *plan
	v       []byte
	answers int
	scratch []byte
	min     kernels.ReduceFunc // element-wise Min of uint8, before tail
	tail    int                // where reduce takes over (len(v) without one)
	reduce  kernels.ReduceFunc // AgreeRider.Reduce, or nil
	data    []byte             // AgreeRider.Apart, sent after v, or nil
	dataIf  int                // AgreeRider.If
}

func (x *agreeRun) answered(r int) bool { return x.v[x.answers+r] == AnswerOK }

func (x *agreeRun) mark(r int, code byte) {
	i := x.answers + r
	x.v[i] = min(x.v[i], code)
}

// step runs step i under hctx: it sends the vector and receives and folds
// in the peer's, skipping peers already marked. It returns only failures
// of this rank, as *OpError.
func (x *agreeRun) step(ctx, hctx context.Context, i int) error {
	st, p, v, t := x.p.steps[i], x.p, x.v, x.c.t
	if st.SendTo >= 0 && x.answered(st.SendTo) {
		err := x.send(hctx, t.Conn(st.SendTo), Tag{Seq: x.seq, Step: p.sendTag[i]}, v[st.Send.Off:st.Send.end()])
		if err := x.settle(ctx, hctx, i, st.SendTo, err); err != nil {
			return err
		}
	}
	if st.RecvFrom < 0 || !x.answered(st.RecvFrom) {
		return nil
	}
	dst := v[st.Recv.Off:st.Recv.end()]
	into := dst
	if st.Combine == Reduce {
		into = x.scratch[:len(dst)+len(x.data)]
	}
	if err := t.Conn(st.RecvFrom).Recv(hctx, Tag{Seq: x.seq, Step: p.recvTag[i]}, into); err != nil {
		return x.settle(ctx, hctx, i, st.RecvFrom, err)
	}
	if st.Combine == Reduce { // every step carries the whole vector
		x.min(dst[:x.tail], into[:x.tail])
		switch {
		case x.data != nil && v[x.dataIf] == 1: // the only step: every rank's say is in
			x.reduce(x.data, into[len(dst):])
		case x.data == nil && x.reduce != nil:
			x.reduce(dst[x.tail:], into[x.tail:])
		}
	}
	return nil
}

// send sends msg, followed by the separate data if there are any.
func (x *agreeRun) send(ctx context.Context, c Conn, tag Tag, msg []byte) error {
	if x.data == nil {
		return c.Send(ctx, tag, msg)
	}
	cm := x.c
	if vc, ok := c.(Vectored); ok {
		cm.agreeParts = append(cm.agreeParts[:0], msg, x.data)
		err := vc.SendVec(ctx, tag, cm.agreeParts)
		clear(cm.agreeParts) // hold on to no caller's buffer
		return err
	}
	cm.agreeGather = append(append(cm.agreeGather[:0], msg...), x.data...)
	return c.Send(ctx, tag, cm.agreeGather)
}

// settle sorts out a Send or Recv error of step i with peer: a missed hop
// deadline or a broken link is marked against the peer and the exchange
// goes on; anything else (ctx ended, this rank's Comm failed or closed, a
// protocol error) is this rank's failure.
func (x *agreeRun) settle(ctx, hctx context.Context, i, peer int, err error) error {
	c := x.c
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil || c.Err() != nil || errors.Is(err, ErrClosed):
	case hctx.Err() != nil:
		x.mark(peer, AnswerSilent)
		return nil
	case errors.Is(err, ErrPeerGone):
		x.mark(peer, AnswerGone)
		return nil
	}
	return &OpError{Op: x.op, Seq: x.seq, Step: i, Rank: c.Rank(), Peer: peer, Host: c.t.Host(peer), Err: err}
}
