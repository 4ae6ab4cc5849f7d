package engine

import (
	"context"
	"errors"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// loopState is what the holder of the turn owns (see Engine.loop): the
// negotiator, which decides, and what the Engine needs to perform its
// decisions.
type loopState struct {
	turnState
	neg     *negotiator
	recv    []byte   // the gathered requests
	parts   [][]byte // a fused batch's tensors (reused)
	tl      *timeline
	running []*task  // the current cycle's tasks, failed if it breaks
	spare   []*entry // the array drain swaps in for the queue's

	deadline  opDeadline    // bounds the data collectives by OpTimeout
	cycleTime time.Duration // Config.CycleTime, or the autotuner's
	realClock bool          // Config.Now is time.Now, so pacing may read it too
	tuneLog   *tuneLog      // rank 0's autotuning log, or nil
}

func (e *Engine) initLoop() {
	earlyMax := 0
	if !e.cfg.noEarly {
		earlyMax = e.c.InlineBytes()
	}
	e.neg = newNegotiator(e.rank, e.size, e.cfg, earlyMax)
	e.cycleTime = e.cfg.CycleTime
	if e.cfg.Timeline != nil && e.rank == 0 {
		e.tl = newTimeline(e.cfg.Timeline, e.now())
	}
	e.initTuning()
}

// cycle runs one negotiation cycle: the negotiator decides; the Engine
// runs the two negotiation collectives and performs the tasks. It returns
// whether every rank was idle, and whether the next cycle should start at
// once (decision.again).
//
// The clock is read at most three times while nothing waits in the
// message table (at start, after the exchange and after a gather): on the
// test VM the reads were a sixth of a small operation's processor time.
func (e *Engine) cycle(ctx context.Context, start time.Time, stopping bool) (idle, again bool, err error) {
	e.drain(start)
	p, err := e.neg.begin(start, stopping)
	if err != nil {
		return false, false, err
	}
	if err := e.exchange(ctx, p, start); err != nil {
		return false, false, err
	}
	decided := e.since(start)
	a := e.neg.exchanged(p.ctl, decided)
	if err := e.follow(a); err != nil {
		return false, false, err
	}
	early := a.early != nil
	if early {
		e.tlBegin([]*task{a.early})
		e.complete(a.early) // counted with the cycle (see count)
	}
	if a.gather != nil {
		if decided, err = e.gather(ctx, p.payload, a.gather); err != nil {
			return false, false, err
		}
	}
	d := e.neg.decide(decided)
	if d.joinDone {
		e.joinDone(d.lastJoined)
	}
	earlyBytes := 0
	if early {
		earlyBytes = a.early.resp.req.Bytes()
	}
	e.count(decided.Sub(start), a.gather != nil, earlyBytes, early, d.cached, d.negotiated)
	if err := e.perform(ctx, &d, decided); err != nil {
		return false, false, err
	}
	e.retune(d.tune)
	if d.inspect { // stalls are looked for among waiting names
		e.note(e.neg.inspect(e.now()))
	}
	return d.idle, d.again, nil
}

// since is now, read as start plus the time since start where the clock
// is the real one: a monotonic read costs half of time.Now's two.
func (e *Engine) since(start time.Time) time.Time {
	if e.realClock {
		return start.Add(time.Since(start))
	}
	return e.now()
}

// drain hands the submitted requests and a Join to the negotiator. A
// request without its submission time (one is read only for the
// timeline) counts as submitted when the cycle that takes it drained the
// queue: at most a cycle late for the ages that the stall inspector
// reads, never early, and one clock read a cycle instead of one for
// every operation. (The cycle's start, read just before, could be early:
// a goroutine preempted between the two reads on a loaded machine let a
// request submitted in between look older than it was, and a stall
// shutdown came up to that much before the operation timeout.)
func (e *Engine) drain(start time.Time) {
	e.mu.Lock()
	q, join := e.queue, e.joinReq
	e.queue, e.joinReq = e.spare[:0], nil
	e.mu.Unlock()
	var now time.Time
	if len(q) > 0 {
		now = e.since(start)
	}
	for _, en := range q {
		if en.submitted.IsZero() {
			en.submitted = now
		}
		e.neg.submit(en)
	}
	clear(q)
	e.spare = q // the queue's other array, for the next drain
	if join != nil {
		e.neg.join()
	}
}

// follow logs what the exchange's agreement asks to and returns its error,
// failing the Comm with it where the agreement says so.
func (e *Engine) follow(a agreement) error {
	if a.err != nil && a.abort {
		e.c.Abort(a.err)
	}
	e.note(a.note)
	return a.err
}

// note writes a log record of the negotiator's, and passes a stall
// warning to Config.OnStall.
func (e *Engine) note(n *logNote) {
	if n == nil {
		return
	}
	e.log.Log(context.Background(), n.level, n.msg, n.args...)
	if n.stall != "" {
		e.stalled(n.stall, n.msg, n.args)
	}
}

// count adds a cycle to the statistics: its negotiation time, whether it
// gathered, whether an early all-reduce (of earlyBytes) completed in it,
// and how many operations the cache and the message table decided.
func (e *Engine) count(negotiation time.Duration, gathered bool, earlyBytes int, early bool, cached, negotiated int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Cycles++
	if early {
		e.stats.Batches++
		e.stats.Tensors++
		e.stats.Early++
		ks := &e.stats.Kinds[KindAllreduce]
		ks.Tensors++
		ks.Bytes += uint64(earlyBytes)
	}
	if e.driving {
		e.stats.Driven++
	}
	e.stats.Negotiation += negotiation
	if gathered {
		e.stats.Gathers++
	}
	e.stats.Cached += uint64(cached)
	e.stats.Negotiated += uint64(negotiated)
}

// gather all-gathers every rank's uncached requests (payload is this
// rank's, sizes every rank's length) and hands them to the negotiator; a
// payload that does not decode fails the Comm.
func (e *Engine) gather(ctx context.Context, payload []byte, sizes []int) (time.Time, error) {
	total, off := 0, 0
	for r, n := range sizes {
		if r == e.rank {
			off = total
		}
		total += n
	}
	if cap(e.recv) < total {
		e.recv = make([]byte, total)
	}
	buf := e.recv[:total]
	copy(buf[off:], payload)
	ctx = e.deadline.arm(ctx)
	defer e.deadline.disarm()
	if err := e.c.Allgather(ctx, kernels.U8, buf, sizes); err != nil {
		return time.Time{}, err
	}
	now := e.now()
	if err := e.neg.gathered(buf, now); err != nil {
		e.c.Abort(err)
		return time.Time{}, err
	}
	return now, nil
}

// stopWith fails every operation still pending with err and records it as
// the engine's cause.
func (e *Engine) stopWith(err error) {
	e.mu.Lock()
	if e.cause == nil {
		e.cause = err
	}
	q, jw := e.queue, e.joinWait
	e.queue, e.joinReq, e.joinWait = nil, nil, nil
	e.setActive(false)
	e.mu.Unlock()
	for _, t := range e.running {
		if !t.done && t.en != nil {
			e.finish(t.en, nil, nil, err)
		}
	}
	held, pending := e.neg.outstanding()
	for _, en := range append(held, pending...) {
		e.finish(en, nil, nil, err)
	}
	for _, en := range q {
		e.finish(en, nil, nil, err)
	}
	if jw != nil {
		jw.finish(-1, err)
	}
	if !errors.Is(err, ErrShutdown) || len(pending)+len(q) > 0 {
		e.log.Debug("engine: engine stopped", "cause", err)
	}
}

// finish completes a local operation.
func (e *Engine) finish(en *entry, out []byte, shape []int, err error) {
	e.mu.Lock()
	delete(e.inflight, en.req.Name)
	e.mu.Unlock()
	en.h.finish(out, shape, err)
}
