package engine

import (
	"errors"
	"fmt"
	"testing"
)

// TestNegotiatorCacheSkipsGather: the second step of the same names fires
// from the response cache, in slot order, with no payload and no gather.
func TestNegotiatorCacheSkipsGather(t *testing.T) {
	l := newLockstep(t, 3, tuning{cache: 16})
	l.submitAll(ar("a", 2), ar("b", 3), ar("c", 4))
	cs := l.cycle()
	if got := firedNames(t, cs); got != "[a b c]" || cs[0].gather == nil || cs[0].negotiated != 3 {
		t.Fatalf("first step: %s, gather %v, %d negotiated", got, cs[0].gather, cs[0].negotiated)
	}
	l.submit(0, ar("c", 4), ar("a", 2), ar("b", 3))
	l.submit(1, ar("b", 3), ar("c", 4), ar("a", 2))
	l.submit(2, ar("a", 2), ar("b", 3), ar("c", 4))
	cs = l.cycle()
	if got := firedNames(t, cs); got != "[a b c]" {
		t.Fatalf("second step decided %s, want [a b c] in slot order", got)
	}
	for r, c := range cs {
		if c.payload != 0 || c.gather != nil || c.cached != 3 || c.negotiated != 0 {
			t.Fatalf("rank %d: payload %d, gather %v, %d cached, %d negotiated", r, c.payload, c.gather, c.cached, c.negotiated)
		}
	}
}

// TestNegotiatorCacheInvalidation: a cached name resubmitted with another
// shape leaves the cache on every rank. When every rank changed it, it is
// negotiated again at once; when one rank did, the others' hits are sent
// uncached next cycle, and the ranks fail it with a shape mismatch.
func TestNegotiatorCacheInvalidation(t *testing.T) {
	for _, c := range []struct {
		name    string
		shapes  []int  // by rank: the second step's shape of a
		decided string // by cycle of the second step
		err     error
		cached  bool // a is in the cache after it
	}{
		{"every rank", []int{4, 4, 4}, "[[a]]", nil, true},
		{"one rank", []int{2, 4, 2}, "[[] [a]]", ErrMismatch, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLockstep(t, 3, tuning{cache: 16})
			l.submitAll(ar("a", 2))
			l.cycle()
			for r, n := range c.shapes {
				l.submit(r, ar("a", n))
			}
			var decided [][]string
			var cs []rankCycle
			for len(decided) == 0 || len(decided[len(decided)-1]) == 0 {
				cs = l.cycle()
				firedNames(t, cs)
				decided = append(decided, names(cs[0].tasks))
			}
			if got := fmt.Sprint(decided); got != c.decided {
				t.Fatalf("decided %s, want %s", got, c.decided)
			}
			for r, rc := range cs {
				req := ar("a", c.shapes[r])
				_, st := l.ns[r].cache.lookup(&req)
				if !errors.Is(rc.tasks[0].err, c.err) || (st == cacheHit) != c.cached {
					t.Fatalf("rank %d: %v, cache %v", r, rc.tasks[0].err, st)
				}
			}
		})
	}
}

// TestNegotiatorCacheEviction: a full cache evicts the least recently used
// name on every rank, which is then negotiated in full again.
func TestNegotiatorCacheEviction(t *testing.T) {
	l := newLockstep(t, 2, tuning{cache: 2})
	for _, c := range []struct {
		name   string
		cached bool
	}{
		{"a", false}, {"b", false}, {"a", true}, {"c", false}, {"b", false}, {"a", false},
	} {
		l.submitAll(ar(c.name, 1))
		cs := l.cycle()
		if got := firedNames(t, cs); got != "["+c.name+"]" {
			t.Fatalf("%s: decided %s", c.name, got)
		}
		if got := cs[0].cached == 1; got != c.cached || (cs[0].gather == nil) != c.cached {
			t.Fatalf("%s: from the cache %v (gather %v), want %v", c.name, got, cs[0].gather, c.cached)
		}
	}
}
