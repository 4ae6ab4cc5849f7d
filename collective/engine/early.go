package engine

import (
	"time"

	"github.com/gorovod/gorovod/collective"
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
// place once both earlyOK bytes are in (earlyAllreduce.apart).
//
// Everything the early all-reduce adds to a cycle lives here: its section
// of the control vector, after the cache bits (c is where they end):
//
//	[c]              earlyOK      1 where the operation is pending
//	[d, d+e)         early data   its data, prescaled, reduced with its own
//	                              op, not Min (d: c+1 rounded up to 8
//	                              bytes; e: its size)
//
// or, apart, earlyOK alone, with the data sent after the vector; what the
// exchange must do with the data (a collective.AgreeRider); and the task
// it completes.

// earlyPlan is the early all-reduce a cycle carries.
type earlyPlan struct {
	slot int    // its cache slot
	name string // its name, checked against the slot
}

// noEarly is the plan of a cycle without an early all-reduce.
var noEarly = earlyPlan{slot: -1}

// earlyAllreduce is one rank's early all-reduce: the one the next cycle
// carries, this cycle's section of the control vector and what the
// exchange must do with its data, and the task the exchange completed.
// The negotiator holds one; every cycle it calls attachEarly (from
// begin), takeEarly (from exchanged) and planNext (from decide).
type earlyAllreduce struct {
	max  int       // the largest control vector with one, in bytes; 0 turns it off
	next earlyPlan // the one the next cycle carries
	on   *response // the one this cycle carries, or nil
	ok   int       // the index of its earlyOK byte in the vector
	data int       // the index of its data in the vector (not apart)
	// apart: this cycle's data travel after the vector, not in it: in a
	// job of two ranks without a prescale, a rank sends the operation's
	// own buffer, which the exchange reduces in place once both ranks'
	// earlyOK is in, saving the copies into and out of the vector. The
	// rider's Apart is what this rank sends: that buffer, or pad when it
	// does not have the operation pending.
	apart bool
	rider collective.AgreeRider // what the exchange does with the data
	pad   []byte
	t     task  // done's storage, reused every cycle
	done  *task // this cycle's, completed by the exchange, or nil
}

// newEarly returns the early all-reduce for control vectors of up to max
// bytes (Comm.InlineBytes; 0 turns it off).
func newEarly(max int) earlyAllreduce {
	return earlyAllreduce{max: max, next: noEarly}
}

// attachEarly decides whether this cycle carries the planned early
// all-reduce and, if so, adds its section to the control vector, whose
// other sections are set, writes this rank's part (its data, prescaled,
// and earlyOK, when it has the operation pending and has not joined) and
// sets the rider. It returns the rider, or nil. The whole vector must stay
// within what the Comm sends before it receives (max, InlineBytes), as a
// small Allreduce does. An empty tensor has nothing to carry: the vector
// gets no early section (no earlyOK byte), so neither may on be set.
func (n *negotiator) attachEarly() *collective.AgreeRider {
	x, v := &n.early, &n.ctl
	x.on, x.apart, x.done = nil, false, nil
	if x.max <= 0 || x.next.slot < 0 {
		return nil
	}
	ce := n.cache.at(x.next.slot)
	if ce == nil || ce.resp.name != x.next.name {
		x.next = noEarly
		return nil
	}
	r := ce.resp
	b := r.req.Bytes()
	if b == 0 || len(v.b)+8+b > x.max {
		return nil
	}
	red, err := kernels.Lookup(r.req.DType, r.req.ReduceOp)
	if err != nil {
		return nil // not a reduction it can run: the usual path reports it
	}
	x.on = r
	pre, _ := r.req.factors(v.size)
	x.apart = v.size == 2 && pre == 1
	x.ok = v.extend(1)
	v.b[x.ok] = 0
	en := n.hits.get(x.next.slot)
	mine := en != nil && !n.joined
	if x.apart {
		x.rider = collective.AgreeRider{Reduce: red, Apart: x.padding(b), If: x.ok}
		if mine {
			x.rider.Apart = en.data
			v.b[x.ok] = 1
		}
		return &x.rider
	}
	pad := (x.ok+1+7)&^7 - (x.ok + 1)
	clear(v.b[v.extend(pad):])
	x.data = v.extend(b) // written by whoever has it, ignored unless all do
	x.rider = collective.AgreeRider{Reduce: red, At: x.data}
	if mine {
		data := v.b[x.data:]
		copy(data, en.data)
		if kernels.Scale(r.req.DType, data, pre) == nil { // else the usual path reports it
			v.b[x.ok] = 1
		}
	}
	return &x.rider
}

// padding returns size bytes for a rank without the early all-reduce to
// send in place of its data (their content is ignored).
func (x *earlyAllreduce) padding(size int) []byte {
	if cap(x.pad) < size {
		x.pad = make([]byte, size)
	}
	return x.pad[:size]
}

// takeEarly, after the exchange, turns an early all-reduce that every
// rank had pending into this cycle's task, completed at now: its data
// copied out of the vector (apart, the exchange reduced them where they
// lie) and postscaled; it takes the operation out of the pending requests
// and hits as a fired slot is (fire then skips its slot). It returns the
// task, or nil.
func (n *negotiator) takeEarly(now time.Time) *task {
	x := &n.early
	x.done, x.rider.Apart = nil, nil // hold on to no buffer of the caller's
	if x.on == nil || n.ctl.b[x.ok] != 1 {
		return nil
	}
	slot := x.next.slot
	en := n.hits.get(slot)
	if en == nil { // every rank said pending, this one too: cannot happen
		return nil
	}
	n.cache.touch(slot)
	n.hits.del(slot)
	delete(n.pending, en.req.Name)
	x.t = task{resp: x.on, en: en, slot: slot, ready: now} // one a cycle: the cycle is done with the last one
	t := &x.t
	if !x.apart {
		copy(en.data, n.ctl.b[x.data:])
	}
	req := &t.resp.req
	_, post := req.factors(n.size)
	if err := kernels.Scale(req.DType, en.data, post); err != nil {
		t.err = err
	} else {
		t.out, t.shape = en.data, en.req.Shape
	}
	x.done = t
	return t
}

// skips reports whether the cache slot's bit is this cycle's early
// all-reduce, which fire must then skip.
func (x *earlyAllreduce) skips(slot int) bool { return x.done != nil && x.done.slot == slot }

// planNext chooses the next cycle's early all-reduce from this cycle's
// operations: the only one, if it was a small, ungrouped, successful
// all-reduce from the cache. A cycle that ran nothing keeps the choice.
func (x *earlyAllreduce) planNext(tasks []*task) {
	ops := len(tasks)
	var t *task
	if x.done != nil {
		ops++
		t = x.done
	} else if ops == 1 {
		t = tasks[0]
	}
	switch {
	case ops == 0:
		return
	case ops > 1 || t.slot < 0 || t.err != nil:
		x.next = noEarly
		return
	}
	req := &t.resp.req
	if req.Kind != KindAllreduce || req.Group != 0 || req.Bytes() > x.max {
		x.next = noEarly
		return
	}
	x.next = earlyPlan{slot: t.slot, name: t.resp.name}
}
