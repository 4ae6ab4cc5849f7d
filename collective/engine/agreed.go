package engine

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// agreement is what the exchanged control vector asks of the Engine.
type agreement struct {
	err   error    // non-nil: stop with err
	abort bool     // fail the Comm with err too: some ranks did not answer
	note  *logNote // to log, or nil
	// early is the early all-reduce that the exchange completed, to
	// finish (see earlyAllreduce.take), or nil.
	early *task
	// gather holds the bytes each rank sends in the all-gather of uncached
	// requests, in rank order (valid until the next begin); nil when no
	// rank sends any.
	gather []int
}

// exchanged takes the control vector that the Min all-reduce of every
// rank's proposal returned (it may be this rank's proposal.ctl itself) and
// reads it at now: the verdict on ranks that did not answer, a stall abort
// or a shutdown that some rank announced, the cache slots that fired and
// whether to gather, and the early all-reduce it completed.
func (n *negotiator) exchanged(ctl []byte, now time.Time) agreement {
	copy(n.ctl.b, ctl)
	if a := n.verdict(); a.err != nil {
		return a
	}
	if a := n.checkStop(now); a.err != nil {
		return a
	}
	n.readTuning(n.ctl.tuning())
	n.ranksJoined = n.ctl.joined()
	early := n.takeEarly(now)
	n.fired = n.fire(n.ranksJoined)
	if n.ctl.flag(ctlNoUncached) {
		return agreement{early: early}
	}
	n.sizes = n.ctl.appendPayloads(n.sizes)
	return agreement{early: early, gather: n.sizes}
}

// verdict reads the answer section of the exchanged vector. If some rank
// found a rank silent or gone, this rank stops with a *NoAnswerError naming
// them, and fails the Comm with it, so that the silent ranks' links close
// and every later operation here fails with the same cause.
func (n *negotiator) verdict() agreement {
	silent, gone := n.ctl.unanswered()
	if silent == nil && gone == nil {
		return agreement{}
	}
	sentinel := n.sentinel
	if silent == nil {
		sentinel = collective.ErrPeerGone
	}
	names, more := n.pendingNames(stallNames)
	err := &NoAnswerError{Op: opNegotiation, Rank: n.rank, Silent: silent, Gone: gone, Limit: n.limit,
		Pending: names, More: more, Err: sentinel}
	note := &logNote{level: slog.LevelDebug, msg: "engine: negotiation: ranks did not answer", args: []any{"err", err}}
	return agreement{err: err, abort: true, note: note}
}

// checkStop reports a stall abort or a shutdown that some rank announced.
func (n *negotiator) checkStop(now time.Time) agreement {
	if !n.ctl.flag(ctlNoAbort) {
		rep := n.stall.collect(now, n.table.waiting(), n.ctl.joined(), 0)
		if rep == nil {
			return agreement{err: n.stall.stopErr()}
		}
		a := agreement{err: rep.err(&n.stall)}
		if n.rank == 0 {
			a.note = &logNote{level: slog.LevelError, stall: StallShutdown, msg: "engine: stalled tensors: shutting down", args: []any{"err", a.err}}
		}
		return a
	}
	var down []int
	for r := range n.size {
		if n.ctl.down(r) && r != n.rank {
			down = append(down, r)
		}
	}
	if len(down) > 0 {
		return agreement{err: fmt.Errorf("engine: rank %v shut down while tensors were in flight: %w", down, ErrShutdown)}
	}
	return agreement{}
}

// fire turns the cache slots that every rank marked into tasks, in slot
// order. With every rank joined nothing fires.
func (n *negotiator) fire(joined []bool) []*task {
	if !slices.Contains(joined, false) {
		return nil
	}
	var out []*task
	for slot, bit := range n.ctl.bits() {
		ce := n.cache.at(slot)
		if bit == 0 || ce == nil || n.early.skips(slot) {
			continue
		}
		n.cache.touch(slot)
		en := n.hits.get(slot)
		if en != nil {
			n.hits.del(slot)
			delete(n.pending, en.req.Name)
		}
		out = append(out, &task{resp: ce.resp, en: en, slot: slot})
	}
	return out
}

// gathered adds the all-gathered uncached requests (every rank's payload,
// in rank order, sized as exchanged said) to the message table. A name
// that arrives uncached leaves the cache on every rank, and local hits on
// it are sent uncached next cycle. A payload that does not decode is an
// error; the Engine fails the Comm with it.
//
// A request's age, which its rank measured at the start of its cycle,
// counts back from now, when the gather ended here: that is after the
// sender measured it, so the request never looks older than it is. (Counted
// back from this rank's own cycle start, which a loaded machine can read
// well before the sender's, it looked older by that skew, and a stalled
// job stopped up to that much before the operation timeout.)
func (n *negotiator) gathered(buf []byte, now time.Time) error {
	for r, size := range n.sizes {
		if size == 0 {
			continue
		}
		if size > len(buf) {
			return fmt.Errorf("engine: negotiation on rank %d: requests from rank %d: %w: %d bytes gathered, %d announced",
				n.rank, r, collective.ErrProtocol, len(buf), size)
		}
		reqs, err := decodeRequests(buf[:size])
		buf = buf[size:]
		if err != nil {
			return fmt.Errorf("engine: negotiation on rank %d: requests from rank %d: %w", n.rank, r, err)
		}
		for _, w := range reqs {
			n.table.add(r, w.Request, now.Add(-w.Age))
			if slot := n.cache.evict(w.Name); slot >= 0 {
				n.unhit(slot)
			}
		}
	}
	return nil
}
