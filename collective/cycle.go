package collective

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// entryState is where a pending request stands in the negotiation.
type entryState uint8

const (
	entryUnsent entryState = iota // to be sent uncached in the next cycle
	entrySent                     // in the message table
	entryHit                      // waiting for its cache slot's bit
)

// staleCycles is the least number of cycles a cache hit waits before it is
// sent uncached instead, so that the message table can name the ranks that
// are missing it; it must also have waited half the stall threshold.
const staleCycles = 4

// entry is one operation submitted on this rank.
type entry struct {
	req       Request
	data      []byte
	h         *Handle
	submitted time.Time
	seq       uint64
	state     entryState
	slot      int // cache slot while a hit
	cycles    int // cycles waited as a hit
}

// loopState is the negotiation state, owned by the loop goroutine.
type loopState struct {
	pending    map[string]*entry // drained, not yet executed
	hits       map[int]*entry    // cache slot -> the pending hit on it
	table      *table
	cache      *responseCache
	held       map[uint64][]*task // grouped members waiting for the rest
	prevJoined []bool             // joined ranks as of the last cycle
	joined     bool               // this rank has joined
	abortNext  bool               // ask every rank to stop for a stall
	ctl        controlVector
	send, recv []byte
	fusion     []byte
	stall      stallInspector
	tl         *timeline
	running    []*task // the current cycle's tasks, failed if it breaks
	xs         exchangeState
}

func (e *Engine) initLoop() {
	e.pending, e.hits, e.held = map[string]*entry{}, map[int]*entry{}, map[uint64][]*task{}
	e.table, e.cache = newTable(e.size), newResponseCache(e.cfg.CacheCapacity)
	e.prevJoined = make([]bool, e.size)
	e.stall = stallInspector{warn: e.cfg.StallWarning, shutdown: e.cfg.StallShutdown}
	if e.cfg.Timeline != nil && e.rank == 0 {
		e.tl = newTimeline(e.cfg.Timeline, e.now())
	}
	e.initExchange()
}

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
			active, next = true, time.Now().Add(e.cfg.CycleTime)
		}
		stopping := e.sleepUntil(next)
		next = time.Now().Add(e.cfg.CycleTime)
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

// cycle runs one negotiation cycle and executes what it decides. It
// returns whether every rank was idle.
func (e *Engine) cycle(ctx context.Context, stopping bool) (idle bool, err error) {
	start := e.now()
	e.drain(start)
	if err := e.buildControl(start, stopping); err != nil {
		return false, err
	}
	if err := e.exchange(ctx); err != nil {
		return false, err
	}
	if err := e.checkStop(); err != nil {
		return false, err
	}
	joined := e.ctl.joined()
	fired := e.fire(joined)
	gathered := !e.ctl.flag(ctlNoUncached)
	if gathered {
		if err := e.gather(ctx, start); err != nil {
			return false, err
		}
	}
	decided := e.now()
	tasks, negotiated := e.decide(fired, joined, decided)
	e.count(decided.Sub(start), gathered, len(fired), negotiated)
	if err := e.perform(ctx, tasks); err != nil {
		return false, err
	}
	e.inspect(joined)
	return e.ctl.flag(ctlIdle), nil
}

func (e *Engine) count(negotiation time.Duration, gathered bool, cached, negotiated int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Cycles++
	e.stats.Negotiation += negotiation
	if gathered {
		e.stats.Gathers++
	}
	e.stats.Cached += uint64(cached)
	e.stats.Negotiated += uint64(negotiated)
}

// drain takes the submitted requests and a Join into the loop's state and
// ages the pending cache hits.
func (e *Engine) drain(now time.Time) {
	e.mu.Lock()
	q, join := e.queue, e.joinReq
	e.queue, e.joinReq = nil, nil
	e.mu.Unlock()
	for _, en := range q {
		e.pending[en.req.Name] = en
		if slot, st := e.cache.lookup(&en.req); st == cacheHit {
			en.state, en.slot = entryHit, slot
			e.hits[slot] = en
		}
	}
	if join != nil {
		e.joined = true
	}
	stale := e.stall.threshold() / 2
	for slot, en := range e.hits {
		if en.cycles++; stale > 0 && en.cycles >= staleCycles && now.Sub(en.submitted) >= stale {
			e.unhit(slot)
		}
	}
}

// unhit turns the pending hit on slot (if any) into an uncached request.
func (e *Engine) unhit(slot int) {
	if en := e.hits[slot]; en != nil {
		en.state, en.slot = entryUnsent, -1
		delete(e.hits, slot)
	}
}

// buildControl fills the control vector and the payload of uncached
// requests (sent in submission order).
func (e *Engine) buildControl(now time.Time, stopping bool) error {
	v := &e.ctl
	v.reset(e.rank, e.size, e.cache.span())
	var unsent []wireRequest
	for _, en := range e.unsentPending() {
		unsent = append(unsent, wireRequest{Request: en.req, Age: now.Sub(en.submitted)})
		en.state = entrySent
	}
	e.send = e.send[:0]
	if len(unsent) > 0 {
		var err error
		if e.send, err = appendRequests(e.send, unsent); err != nil {
			return err
		}
	}
	v.set(ctlNoAbort, !e.abortNext)
	v.set(ctlNoUncached, len(e.send) == 0)
	v.set(ctlIdle, len(e.pending) == 0 && len(e.held) == 0 && !e.joined)
	v.setJoined(e.joined)
	v.setShutdown(stopping)
	v.setPayload(len(e.send))
	e.setBits()
	return nil
}

// unsentPending returns the pending entries to send, in submission order.
func (e *Engine) unsentPending() []*entry {
	var out []*entry
	for _, en := range e.pending {
		if en.state == entryUnsent {
			out = append(out, en)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// setBits marks the slots of pending hits. A joined rank marks every slot
// except those of names it has pending otherwise: it agrees to whatever
// the others are ready for.
func (e *Engine) setBits() {
	if !e.joined {
		for slot := range e.hits {
			e.ctl.setBit(slot)
		}
		return
	}
	for slot := range e.cache.span() {
		ce := e.cache.at(slot)
		if ce == nil {
			continue
		}
		if en := e.pending[ce.resp.name]; en == nil || en.state == entryHit {
			e.ctl.setBit(slot)
		}
	}
}

// checkStop reports a stall abort or a shutdown that some rank announced.
func (e *Engine) checkStop() error {
	if !e.ctl.flag(ctlNoAbort) {
		rep := e.stall.collect(e.now(), e.table.waiting(), e.ctl.joined(), 0)
		if rep == nil {
			return fmt.Errorf("%w: a rank stopped the job for a stall of more than %v", ErrStall, e.cfg.StallShutdown)
		}
		err := rep.err(e.cfg.StallShutdown)
		if e.rank == 0 {
			e.log.Error("collective: stalled tensors: shutting down", "err", err)
		}
		return err
	}
	var down []int
	for r, d := range e.ctl.shutdown() {
		if d && r != e.rank {
			down = append(down, r)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("collective: rank %v shut down while tensors were in flight: %w", down, ErrShutdown)
	}
	return nil
}

// gather all-gathers every rank's uncached requests and adds them to the
// message table. A name that arrives uncached leaves the cache on every
// rank, and local hits on it are sent uncached next cycle.
func (e *Engine) gather(ctx context.Context, now time.Time) error {
	sizes := e.ctl.payloads()
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
	copy(buf[off:], e.send)
	if e.cfg.OpTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.OpTimeout)
		defer cancel()
	}
	if err := e.c.Allgather(ctx, kernels.U8, buf, sizes); err != nil {
		return err
	}
	for r, n := range sizes {
		if n == 0 {
			continue
		}
		reqs, err := decodeRequests(buf[:n])
		buf = buf[n:]
		if err != nil {
			err = fmt.Errorf("collective: negotiation on rank %d: requests from rank %d: %w", e.rank, r, err)
			e.c.Abort(err)
			return err
		}
		for _, w := range reqs {
			e.table.add(r, w.Request, now.Add(-w.Age))
			if slot := e.cache.evict(w.Name); slot >= 0 {
				e.unhit(slot)
			}
		}
	}
	return nil
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
	for _, ts := range e.held {
		for _, t := range ts {
			if t.en != nil {
				e.finish(t.en, nil, nil, err)
			}
		}
	}
	for _, en := range e.pending {
		e.finish(en, nil, nil, err)
	}
	for _, en := range q {
		e.finish(en, nil, nil, err)
	}
	if jw != nil {
		jw.finish(-1, err)
	}
	if !errors.Is(err, ErrShutdown) || len(e.pending)+len(q) > 0 {
		e.log.Debug("collective: engine stopped", "cause", err)
	}
}

// finish completes a local operation.
func (e *Engine) finish(en *entry, out []byte, shape []int, err error) {
	e.mu.Lock()
	delete(e.inflight, en.req.Name)
	e.mu.Unlock()
	en.h.finish(out, shape, err)
}
