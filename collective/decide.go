package collective

import (
	"fmt"
	"slices"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// task is one response as this rank executes it.
type task struct {
	resp  *response
	en    *entry    // this rank's submission; nil if it has none (joined)
	err   error     // set when it fails without running
	ready time.Time // when the negotiation decided it
	out   []byte
	shape []int
	done  bool
}

// fire turns the cache slots that every rank marked into tasks, in slot
// order. With every rank joined nothing fires.
func (e *Engine) fire(joined []bool) []*task {
	if !slices.Contains(joined, false) {
		return nil
	}
	var out []*task
	for slot, bit := range e.ctl.bits() {
		ce := e.cache.at(slot)
		if bit == 0 || ce == nil {
			continue
		}
		e.cache.touch(slot)
		en := e.hits[slot]
		if en != nil {
			delete(e.hits, slot)
			delete(e.pending, en.req.Name)
		}
		out = append(out, &task{resp: ce.resp, en: en})
	}
	return out
}

// decide builds the cycle's tasks: the fired cache slots, then the names
// the message table found ready (which enter the cache), with the errors
// that joined ranks imply, holding grouped members back until their group
// is complete. It returns the tasks and how many were negotiated in full.
func (e *Engine) decide(fired []*task, joined []bool, now time.Time) ([]*task, int) {
	if e.completeJoin(joined) {
		return nil, 0
	}
	tasks := fired
	ready := e.table.ready(joined)
	for _, r := range ready {
		en := e.pending[r.name]
		if en != nil && en.state == entrySent {
			delete(e.pending, r.name)
		} else {
			en = nil
		}
		if r.err == nil {
			e.remember(en, r)
		}
		tasks = append(tasks, &task{resp: r, en: en})
	}
	anyJoined := slices.Contains(joined, true)
	for _, t := range tasks {
		t.ready = now
		switch {
		case t.resp.err != nil:
			t.err = t.resp.err
		case anyJoined:
			t.err = joinedError(t.resp, joined)
		}
	}
	return e.holdGroups(tasks), len(ready)
}

// remember puts a response negotiated in full into the cache, with this
// rank's request; a hit on the slot it evicts is sent uncached instead.
func (e *Engine) remember(en *entry, r *response) {
	var local *Request
	if en != nil {
		local = &en.req
	}
	if slot, evicted := e.cache.put(local, r); evicted != "" {
		e.unhit(slot)
	}
}

// joinedError is the error of an operation that cannot take the joined
// ranks: anything but a sum or average all-reduce.
func joinedError(r *response, joined []bool) error {
	var ranks []int
	for i, j := range joined {
		if j {
			ranks = append(ranks, i)
		}
	}
	op := r.req.ReduceOp
	if r.req.Kind == KindAllreduce && (op == kernels.Sum || op == kernels.Average) {
		return nil
	}
	what := r.req.Kind.String()
	if r.req.Kind == KindAllreduce {
		what = op.String() + " " + what
	}
	return fmt.Errorf("collective: tensor %q: %s while ranks %v have joined: only sum and average all-reduces take joined ranks: %w",
		r.name, what, ranks, ErrJoined)
}

// holdGroups keeps the members of a grouped all-reduce back until all of
// its members are decided and releases them together; when one member
// fails, they all fail.
func (e *Engine) holdGroups(tasks []*task) []*task {
	var out []*task
	for _, t := range tasks {
		g := t.resp.req.Group
		if g == 0 {
			out = append(out, t)
			continue
		}
		members := append(e.held[g], t)
		if len(members) < t.resp.req.GroupSize {
			e.held[g] = members
			continue
		}
		delete(e.held, g)
		failTogether(members)
		out = append(out, members...)
	}
	return out
}

func failTogether(members []*task) {
	for _, bad := range members {
		if bad.err == nil {
			continue
		}
		for _, t := range members {
			if t.err == nil {
				t.err = fmt.Errorf("collective: tensor %q: grouped with %q, which failed: %w", t.resp.name, bad.resp.name, bad.err)
			}
		}
		return
	}
}
