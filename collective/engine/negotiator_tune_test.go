package engine

import (
	"fmt"
	"testing"
	"time"
)

// tuneState prints what a negotiator's autotuning must keep identical on
// every rank: the setting in effect, whether tuning is over, the fusion
// threshold and the response cache (capacity and the name in each slot).
func tuneState(n *negotiator) string {
	slots := make([]string, n.cache.span())
	for i := range slots {
		if ce := n.cache.at(i); ce != nil {
			slots[i] = ce.resp.name
		}
	}
	return fmt.Sprintf("%v frozen=%v fusion=%d cache=%d%q", n.tune.cur, n.tune.frozen, n.fusion, n.cache.capacity, slots)
}

// TestNegotiatorTuningLockstep: ranks that submit the same steps in
// different orders, while rank 0's tuner searches, apply every setting in
// the same cycle, keep identical caches and decisions, and end with the
// setting that the step times (a function of the setting in effect)
// favour; the control vector then loses its autotuning section.
func TestNegotiatorTuningLockstep(t *testing.T) {
	const size = 3
	l := newLockstep(t, size, tuning{fusion: 64 << 20, cache: 1024})
	plan := testPlan()
	for _, n := range l.ns {
		n.startTuning(plan)
	}
	orders := [][]string{{"a", "b", "c", "d", "e"}, {"e", "d", "c", "b", "a"}, {"c", "a", "e", "b", "d"}}
	var trials []tuneTrial
	var chosen *tuneTrial
	applied := 0
	for step := 0; chosen == nil; step++ {
		if step > 200 {
			t.Fatalf("tuning not over after %d steps (%d trials)", step, len(trials))
		}
		during := l.ns[0].tune.cur
		for r, order := range orders {
			for _, name := range order {
				l.submit(r, ar(name, 1000*int(name[0]-'a'+1)))
			}
		}
		for decided := 0; decided < len(orders[0]); {
			cs := l.cycle()
			decided += len(cs[0].tasks)
			for _, tk := range cs[0].tasks {
				if tk.err != nil {
					t.Fatalf("step %d: %v", step, tk.err)
				}
			}
			firedNames(t, cs)
			sameOnEveryRank(t, cs, "plan", func(c rankCycle) string { return planNames(c.decision) })
			sameOnEveryRank(t, cs, "applied setting", func(c rankCycle) string { return fmt.Sprint(c.tune.apply) })
			for r, n := range l.ns[1:] {
				if got, want := tuneState(n), tuneState(l.ns[0]); got != want {
					t.Fatalf("step %d: rank %d has %s, rank 0 has %s", step, r+1, got, want)
				}
			}
			if cs[0].tune.apply != nil {
				applied++
			}
			trials = append(trials, cs[0].tune.trials...)
			if c := cs[0].tune.chosen; c != nil {
				chosen = c
			}
		}
		l.now = l.now.Add(time.Duration(1e12 / fakeScore(during))) // the step took longer where the score is lower
	}
	if len(trials) != 12 || applied < 11 {
		t.Errorf("%d trials, %d changes applied; want 12 and at least 11", len(trials), applied)
	}
	want := tuneSetting{fusion: 16 << 20, cycle: 2500 * time.Microsecond, hier: plan.hiers[1], cache: 1024}
	if chosen.set != want || l.ns[2].tune.cur != want || l.ns[2].fusion != want.fusion {
		t.Errorf("chose %v, rank 2 runs %v (fusion %d); want %v", chosen.set, l.ns[2].tune.cur, l.ns[2].fusion, want)
	}
	before := len(l.ns[0].ctl.b)
	l.submitAll(ar("z", 1))
	props, _ := l.propose()
	if got := len(props[0].ctl); got != before-tuneBytes {
		t.Errorf("control vector of %d bytes after tuning, want %d (no autotuning section)", got, before-tuneBytes)
	}
}

// TestNegotiatorTuningCacheOffWithPendingHit: when the cache is switched
// off while a rank waits on a hit, every rank empties its cache in the
// same cycle, and the waiting request is sent uncached and decided once
// the other rank submits it.
func TestNegotiatorTuningCacheOffWithPendingHit(t *testing.T) {
	l := newLockstep(t, 2, tuning{fusion: 64 << 20, cache: 1024})
	plan := testPlan()
	plan.warmup = 1000 // the tuner stays on its first setting unless told
	for _, n := range l.ns {
		n.startTuning(plan)
	}
	l.submitAll(ar("a", 4))
	if got := firedNames(t, l.cycle()); got != "[a]" {
		t.Fatalf("first cycle decided %s, want [a]", got)
	}
	l.submit(0, ar("a", 4))
	if l.ns[0].hits.get(0) == nil {
		t.Fatal("a is not a pending hit on rank 0")
	}
	off := plan.base
	off.cache = 0
	l.ns[0].tune.tuner.cur = off // what the tuner would ask for in a trial of the cache off
	cs := l.cycle()
	if firedNames(t, cs) != "[]" || cs[0].tune.apply == nil || cs[1].tune.apply == nil {
		t.Fatalf("switching the cache off: decided %s, applied %v and %v", firedNames(t, cs), cs[0].tune.apply, cs[1].tune.apply)
	}
	for r, n := range l.ns {
		if n.cache.capacity != 0 || n.cache.span() != 0 || n.hits.len() != 0 {
			t.Fatalf("rank %d: cache of %d entries, span %d, %d hits after switching it off", r, n.cache.capacity, n.cache.span(), n.hits.len())
		}
	}
	if cs := l.cycle(); cs[0].payload == 0 {
		t.Fatal("rank 0 did not send its request uncached")
	}
	l.submit(1, ar("a", 4))
	var got string
	for range 3 {
		if got = firedNames(t, l.cycle()); got != "[]" {
			break
		}
	}
	if got != "[a]" {
		t.Fatalf("decided %s once rank 1 submitted, want [a]", got)
	}
}
