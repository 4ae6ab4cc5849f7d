package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// task is one response as this rank executes it: the negotiator fills
// resp, en, err and ready, the Engine out, shape and done.
type task struct {
	resp  *response
	en    *entry    // this rank's submission; nil if it has none (joined)
	slot  int       // the cache slot it fired from, or -1 (see earlyAllreduce.planNext)
	err   error     // set when it fails without running
	ready time.Time // when the negotiation decided it
	out   []byte
	shape []int
	done  bool
}

// decision is what a cycle decided, the same on every rank.
type decision struct {
	tasks      []*task // fired cache slots, then negotiated names (groups once complete)
	plan       [][]int // batches of indexes into tasks, in execution order (see planTasks)
	cached     int     // tasks fired from the response cache
	negotiated int     // responses negotiated in full
	joinDone   bool    // every rank has joined: Join returns
	lastJoined int     // then: the last rank to join
	idle       bool    // every rank was idle at the exchange
	inspect    bool    // names wait in the message table: look for stalls after the tasks
	// again says that the next cycle should start at once: some rank took
	// something new into this one and this rank still has requests that
	// are not ready everywhere (its peers may be about to submit them).
	again bool
	tune  tuneResult
}

// decide builds the cycle's tasks at now (see decideTasks), then does
// autotuning's part of the cycle (see tuneCycle): the setting it applies
// acts on the cycles after this one.
func (n *negotiator) decide(now time.Time) decision {
	d := n.decideTasks(now)
	measured := d.tasks
	if n.early.done != nil && n.tune != nil { // the autotuner counts it with the rest
		measured = append([]*task{n.early.done}, d.tasks...)
	}
	d.tune = n.tuneCycle(measured, now)
	// Stalls are looked for among waiting names; with none, a stall has
	// cleared and its next one warns afresh.
	if d.inspect = n.table.len() > 0; !d.inspect {
		n.stall.quiet()
	}
	return d
}

// decideTasks builds the cycle's tasks at now: the fired cache slots, then
// the names the message table found ready (which enter the cache), with
// the errors that joined ranks imply, holding grouped members back until
// their group is complete, and plans them into batches.
func (n *negotiator) decideTasks(now time.Time) decision {
	d := decision{cached: len(n.fired), idle: n.ctl.flag(ctlIdle)}
	joined := n.ranksJoined
	if d.joinDone, d.lastJoined = n.completeJoin(joined); d.joinDone {
		return d
	}
	tasks := n.fired
	ready := n.table.ready(joined)
	for _, r := range ready {
		en := n.pending[r.name]
		if en != nil && en.state == entrySent {
			delete(n.pending, r.name)
		} else {
			en = nil
		}
		if r.err == nil {
			n.remember(en, r)
		}
		tasks = append(tasks, &task{resp: r, en: en, slot: -1})
	}
	d.negotiated = len(ready)
	d.again = !n.ctl.flag(ctlNothingNew) && len(n.pending) > 0
	setErrors(tasks, joined, now)
	d.tasks = n.holdGroups(tasks)
	d.plan = planTasks(d.tasks, n.fusion)
	n.early.planNext(d.tasks)
	return d
}

// setErrors marks the tasks ready at now and fails those that negotiation
// rejected or that the joined ranks cannot take.
func setErrors(tasks []*task, joined []bool, now time.Time) {
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
}

// remember puts a response negotiated in full into the cache, with this
// rank's request; a hit on the slot it evicts is sent uncached instead.
func (n *negotiator) remember(en *entry, r *response) {
	var local *Request
	if en != nil {
		local = &en.req
	}
	if slot, evicted := n.cache.put(local, r); evicted != "" {
		n.unhit(slot)
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
	return fmt.Errorf("engine: tensor %q: %s while ranks %v have joined: only sum and average all-reduces take joined ranks: %w",
		r.name, what, ranks, ErrJoined)
}

// holdGroups keeps the members of a group (of all-reduces, all-gathers or
// reduce-scatters) back until all of its members are decided and releases them together; when one member
// fails, they all fail.
func (n *negotiator) holdGroups(tasks []*task) []*task {
	var out []*task
	for _, t := range tasks {
		g := t.resp.req.Group
		if g == 0 {
			out = append(out, t)
			continue
		}
		members := append(n.held[g], t)
		if len(members) < t.resp.req.GroupSize {
			n.held[g] = members
			continue
		}
		delete(n.held, g)
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
				t.err = fmt.Errorf("engine: tensor %q: grouped with %q, which failed: %w", t.resp.name, bad.resp.name, bad.err)
			}
		}
		return
	}
}
