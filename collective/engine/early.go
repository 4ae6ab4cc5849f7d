package engine

import (
	"github.com/gorovod/gorovod/kernels"
)

// The early all-reduce. When a cycle's only operation was a small
// all-reduce answered by the response cache (a metric, a loss, a training
// step of one gradient), the next cycle's control vector carries room for
// the same all-reduce again, if the whole vector stays within
// Comm.InlineBytes: each rank that has it pending writes its data there,
// prescaled, and sets earlyOK. If every rank did, the exchange
// itself has all-reduced it, by the same recursive doubling, in the same
// order, that Comm.Allreduce uses up to Comm.InlineBytes, so bit for bit
// the same result, and the operation completes without a collective of its
// own; otherwise its data is ignored and it fires from the cache as usual.
// The choice follows from the last decision and the cache, which every
// rank holds alike, so every rank sizes the vector the same. In a job of
// two ranks, where the exchange is one step, an all-reduce without a
// prescale does not copy its data into the vector and back: each rank
// sends its own buffer after the vector, and the exchange reduces it in
// place once both earlyOK bytes are in (negotiator.earlyApart).

// earlyPlan is the early all-reduce a cycle carries.
type earlyPlan struct {
	slot int    // its cache slot
	name string // its name, checked against the slot
}

// noEarly is the plan of a cycle without an early all-reduce.
var noEarly = earlyPlan{slot: -1}

// earlyBytes returns the size of the early all-reduce this cycle carries
// (0: none) and sets n.earlyOn. The vector with it must fit in earlyMax.
func (n *negotiator) earlyBytes() int {
	n.earlyOn, n.earlyApart = nil, false
	if n.earlyMax <= 0 || n.next.slot < 0 {
		return 0
	}
	ce := n.cache.at(n.next.slot)
	if ce == nil || ce.resp.name != n.next.name {
		n.next = noEarly
		return 0
	}
	// The whole vector must stay within what the Comm sends before it
	// receives (InlineBytes), as a small Allreduce does. An empty tensor
	// has nothing to carry: the vector gets no early part (no earlyOK
	// byte), so neither may earlyOn be set.
	b := ce.resp.req.Bytes()
	if b == 0 || ctlHeader+7*n.size+n.tuneSection()+n.cache.span()+8+b > n.earlyMax {
		return 0
	}
	n.earlyOn = ce.resp
	req := &ce.resp.req
	pre, _ := req.factors(n.size)
	n.earlyApart = n.size == 2 && pre == 1
	return b
}

// fillEarly writes this rank's data of the early all-reduce, prescaled,
// and earlyOK, when it has the operation pending and has not joined.
func (n *negotiator) fillEarly() {
	r := n.earlyOn
	if r == nil {
		return
	}
	en := n.hits.get(n.next.slot)
	if n.earlyApart {
		n.earlySend = n.earlyPadding(r.req.Bytes())
		if en != nil && !n.joined {
			n.earlySend = en.data
			n.ctl.b[n.ctl.early] = 1
		}
		return
	}
	if en == nil || n.joined {
		return
	}
	data := n.ctl.earlyData()
	copy(data, en.data)
	pre, _ := r.req.factors(n.size)
	if err := kernels.Scale(r.req.DType, data, pre); err != nil {
		return // not a type it can scale: the usual path reports it
	}
	n.ctl.b[n.ctl.early] = 1
}

// earlyPadding returns size bytes for a rank without the early
// all-reduce to send in place of its data (their content is ignored).
func (n *negotiator) earlyPadding(size int) []byte {
	if cap(n.earlyPad) < size {
		n.earlyPad = make([]byte, size)
	}
	return n.earlyPad[:size]
}

// earlyReduce is how the exchange reduces the early data: with reduce,
// from tail on in the vector, or, when they travel apart, in data, where
// the vector's earlyOK (at flag) says every rank sent its own. It returns
// a nil reduce without an early all-reduce.
func (n *negotiator) earlyReduce() (tail int, data []byte, flag int, reduce kernels.ReduceFunc) {
	r := n.earlyOn
	if r == nil {
		return 0, nil, 0, nil
	}
	red, err := kernels.Lookup(r.req.DType, r.req.ReduceOp)
	if err != nil {
		return 0, nil, 0, nil
	}
	if n.earlyApart {
		return 0, n.earlySend, n.ctl.early, red
	}
	return n.ctl.data, nil, 0, red
}

// takeEarly, after the exchange, turns an early all-reduce that every rank
// had pending into this cycle's early task (its data reduced in the
// vector), taking it out of the pending requests and hits as a fired slot
// is. fire then skips its slot.
func (n *negotiator) takeEarly() {
	n.early, n.earlySend = nil, nil
	if n.earlyOn == nil || n.ctl.b[n.ctl.early] != 1 {
		return
	}
	slot := n.next.slot
	en := n.hits.get(slot)
	if en == nil { // every rank said pending, this one too: cannot happen
		return
	}
	n.cache.touch(slot)
	n.hits.del(slot)
	delete(n.pending, en.req.Name)
	n.earlyTask = task{resp: n.earlyOn, en: en, slot: slot} // one a cycle: the cycle is done with the last one
	n.early = &n.earlyTask
}

// planEarly chooses the next cycle's early all-reduce from this cycle's
// operations: the only one, if it was a small, ungrouped, successful
// all-reduce from the cache. A cycle that ran nothing keeps the choice.
func (n *negotiator) planEarly(tasks []*task) {
	ops := len(tasks)
	var t *task
	if n.early != nil {
		ops++
		t = n.early
	} else if ops == 1 {
		t = tasks[0]
	}
	switch {
	case ops == 0:
		return
	case ops > 1 || t.slot < 0 || t.err != nil:
		n.next = noEarly
		return
	}
	req := &t.resp.req
	if req.Kind != KindAllreduce || req.Group != 0 || req.Bytes() > n.earlyMax {
		n.next = noEarly
		return
	}
	n.next = earlyPlan{slot: t.slot, name: t.resp.name}
}
