package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// proposal is what a rank contributes to a cycle: the control vector for
// the Min all-reduce, with the data of an early all-reduce that ride with
// it, and the payload for the all-gather that follows when some rank
// sends uncached requests. All are views into the negotiator, valid until
// the next begin.
type proposal struct {
	ctl     []byte                 // the control vector, all-reduced in place
	answers int                    // the index in ctl of rank 0's answer code
	rider   *collective.AgreeRider // what the exchange does with the early data, or nil
	payload []byte                 // this rank's uncached requests, serialized
}

// begin starts a cycle at now: it ages the pending cache hits and builds
// the control vector and the payload of uncached requests (sent in
// submission order). stopping announces that this rank shuts down.
func (n *negotiator) begin(now time.Time, stopping bool) (proposal, error) {
	n.start, n.ranksJoined, n.fired, n.sizes = now, nil, nil, n.sizes[:0]
	n.ageHits(now)
	v := &n.ctl
	v.reset(n.rank, n.size, n.tuneSection(), n.cache.span())
	n.proposeTuning(v.tuning())
	if err := n.buildPayload(now); err != nil {
		return proposal{}, err
	}
	v.set(ctlNoAbort, !n.abortNext)
	v.set(ctlNoUncached, len(n.send) == 0)
	v.set(ctlIdle, len(n.pending) == 0 && len(n.held) == 0 && !n.joined)
	v.set(ctlNothingNew, !n.fresh)
	n.fresh = false
	v.setJoined(n.joined)
	v.setShutdown(stopping)
	v.setPayload(len(n.send))
	n.setBits()
	rider := n.attachEarly()
	return proposal{ctl: v.b, answers: v.answerAt(0), rider: rider, payload: n.send}, nil
}

// ageHits counts a cycle and sends uncached instead the pending hits that
// have waited long enough, in cycles and in time, for the message table to
// name the ranks that miss them. It looks at the hits only once the oldest
// may have waited long enough (n.ageDue): usually it has not, and a small
// step saves the walk. Submission times never decrease, so a hit that
// arrives after the last look is due no earlier than n.ageDue.
func (n *negotiator) ageHits(now time.Time) {
	n.cycles++
	stale := n.stall.threshold() / 2
	if stale <= 0 || n.hits.len() == 0 || now.Before(n.ageDue) {
		return
	}
	var due time.Time
	n.hits.slots(func(slot int, en *entry) {
		waited := now.Sub(en.submitted) >= stale
		if waited && n.cycles-en.hitCycle >= staleCycles {
			n.unhit(slot)
			return
		}
		next := en.submitted.Add(stale)
		if waited {
			next = now // stale in time, not yet in cycles: look again next cycle
		}
		if due.IsZero() || next.Before(due) {
			due = next
		}
	})
	n.ageDue = due
}

// unhit turns the pending hit on slot (if any) into an uncached request.
func (n *negotiator) unhit(slot int) {
	if en := n.hits.get(slot); en != nil {
		en.state, en.slot = entryUnsent, -1
		n.hits.del(slot)
	}
}

// buildPayload serializes the unsent requests into n.send.
func (n *negotiator) buildPayload(now time.Time) error {
	var unsent []wireRequest
	for _, en := range n.unsentPending() {
		unsent = append(unsent, wireRequest{Request: en.req, Age: now.Sub(en.submitted)})
		en.state = entrySent
	}
	n.send = n.send[:0]
	if len(unsent) == 0 {
		return nil
	}
	var err error
	n.send, err = appendRequests(n.send, unsent)
	return err
}

// unsentPending returns the pending entries to send, in submission order.
func (n *negotiator) unsentPending() []*entry {
	if len(n.pending) == n.hits.len() {
		return nil // every pending entry is a hit (hits are pending too)
	}
	var out []*entry
	for _, en := range n.pending {
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
func (n *negotiator) setBits() {
	if !n.joined {
		n.hits.slots(func(slot int, _ *entry) { n.ctl.setBit(slot) })
		return
	}
	for slot := range n.cache.span() {
		ce := n.cache.at(slot)
		if ce == nil {
			continue
		}
		if en := n.pending[ce.resp.name]; en == nil || en.state == entryHit {
			n.ctl.setBit(slot)
		}
	}
}
