package engine

import (
	"fmt"
	"testing"
)

func cached(c *responseCache, name string, shape ...int) int {
	r := ar(name, shape...)
	slot, _ := c.put(&r, &response{name: name, req: r})
	return slot
}

func TestCacheLookup(t *testing.T) {
	c := newResponseCache(4)
	cached(c, "a", 2)
	same, bigger, other := ar("a", 2), ar("a", 3), ar("b", 2)
	for _, x := range []struct {
		r    Request
		want cacheState
	}{{same, cacheHit}, {bigger, cacheInvalid}, {other, cacheMiss}} {
		if _, got := c.lookup(&x.r); got != x.want {
			t.Errorf("%+v: state %d, want %d", x.r, got, x.want)
		}
	}
	// A rank that had no request of its own (it was joined) never hits.
	c.put(nil, &response{name: "j", req: ar("j", 1)})
	if _, st := c.lookup(&Request{Name: "j", Kind: KindAllreduce}); st != cacheInvalid {
		t.Fatalf("joined entry: state %d", st)
	}
}

// TestCacheSlotsAndLRU: slots are the lowest free ones, eviction takes
// the least recently used, and the span shrinks when the top slots free.
func TestCacheSlotsAndLRU(t *testing.T) {
	c := newResponseCache(3)
	for i, n := range []string{"a", "b", "c"} {
		if slot := cached(c, n, 1); slot != i {
			t.Fatalf("%s in slot %d", n, slot)
		}
	}
	c.touch(0) // a used: b is now the least recently used
	slot, evicted := c.put(nil, &response{name: "d"})
	if slot != 1 || evicted != "b" {
		t.Fatalf("put d: slot %d evicted %q", slot, evicted)
	}
	if c.evict("b") != -1 || c.evict("c") != 2 || c.span() != 2 {
		t.Fatalf("evict: span %d", c.span())
	}
	if c.evict("a") != 0 || c.span() != 2 || c.at(0) != nil {
		t.Fatalf("evicting a low slot keeps the span: %d", c.span())
	}
	if slot := cached(c, "e", 1); slot != 0 {
		t.Fatalf("e in slot %d, want the free slot 0", slot)
	}
	if slot := cached(c, "e", 2); slot != 0 || c.span() != 2 {
		t.Fatalf("re-putting e: slot %d span %d", slot, c.span())
	}
}

// TestCacheIdenticalOnEveryRank: two ranks that apply the same sequence
// of decisions (with different local requests) end with the same slots.
func TestCacheIdenticalOnEveryRank(t *testing.T) {
	a, b := newResponseCache(5), newResponseCache(5)
	for i := range 40 {
		name := fmt.Sprint("t", i%9)
		ra, rb := ar(name, 1), ar(name, 1+i%2) // local requests may differ
		resp := &response{name: name, req: ra}
		sa, ea := a.put(&ra, resp)
		sb, eb := b.put(&rb, resp)
		if sa != sb || ea != eb {
			t.Fatalf("step %d: slots %d/%d evicted %q/%q", i, sa, sb, ea, eb)
		}
		if i%3 == 0 {
			a.touch(sa)
			b.touch(sb)
		}
		if i%7 == 0 {
			if a.evict(name) != b.evict(name) {
				t.Fatal("evict differs")
			}
		}
	}
}

func TestCacheDisabled(t *testing.T) {
	c := newResponseCache(0)
	if slot := cached(c, "a", 1); slot != -1 || c.span() != 0 {
		t.Fatalf("slot %d span %d", slot, c.span())
	}
	if _, st := c.lookup(&Request{Name: "a"}); st != cacheMiss {
		t.Fatal("a disabled cache hit")
	}
}

// TestHitTable: the pending hits by slot, as the negotiator keeps them.
func TestHitTable(t *testing.T) {
	var h hitTable
	a, b, c := &entry{seq: 1}, &entry{seq: 2}, &entry{seq: 3}
	h.set(5, a)
	h.set(0, b)
	h.set(2, c)
	h.set(2, c) // again: still one
	h.del(7)    // none there, past the end
	h.del(-1)
	if h.len() != 3 || h.get(5) != a || h.get(0) != b || h.get(1) != nil || h.get(9) != nil || h.get(-1) != nil {
		t.Fatalf("len %d, get(5) %v get(0) %v get(1) %v", h.len(), h.get(5), h.get(0), h.get(1))
	}
	var order []int
	h.slots(func(slot int, en *entry) {
		order = append(order, slot)
		if slot == 2 {
			h.del(slot) // deleting the current one is allowed
		}
	})
	if fmt.Sprint(order) != "[0 2 5]" || h.len() != 2 || h.get(2) != nil {
		t.Fatalf("visited %v, then len %d, get(2) %v", order, h.len(), h.get(2))
	}
}
