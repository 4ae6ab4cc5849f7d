package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// TestNegotiatorJoin: a joined rank takes part in sum all-reduces with no
// submission of its own (zeros), from the table and from the cache; other
// operations fail with ErrJoined on every rank; once every rank has
// joined, the join completes everywhere with the last rank to join.
func TestNegotiatorJoin(t *testing.T) {
	l := newLockstep(t, 3, tuning{cache: 8})
	l.ns[2].join()
	maxOp := ar("m", 2)
	maxOp.ReduceOp = kernels.Max
	for _, r := range []int{0, 1} {
		l.submit(r, ar("g", 2), maxOp)
	}
	cs := l.cycle()
	if got := firedNames(t, cs); got != "[g m]" {
		t.Fatalf("decided %s, want [g m]", got)
	}
	for r, c := range cs {
		g, m := c.tasks[0], c.tasks[1]
		if g.err != nil || (g.en == nil) != (r == 2) {
			t.Fatalf("rank %d: sum all-reduce: err %v, own entry %v", r, g.err, g.en != nil)
		}
		if r == 2 && !bytes.Equal(g.buffer(), make([]byte, 8)) {
			t.Fatalf("joined rank contributes %v, want 8 zero bytes", g.buffer())
		}
		if !errors.Is(m.err, ErrJoined) || !strings.Contains(m.err.Error(), "ranks [2]") {
			t.Fatalf("rank %d: max all-reduce: %v, want ErrJoined naming rank 2", r, m.err)
		}
	}
	l.submit(0, ar("g", 2))
	l.submit(1, ar("g", 2))
	if cs := l.cycle(); firedNames(t, cs) != "[g]" || cs[2].cached != 1 {
		t.Fatalf("cached step: %s, %d cached on the joined rank", names(cs[2].tasks), cs[2].cached)
	}
	l.ns[0].join()
	l.ns[1].join()
	for r, c := range l.cycle() {
		if !c.joinDone || c.lastJoined != 1 || c.idle || l.ns[r].joined {
			t.Fatalf("rank %d: join done %v, last %d, idle %v, still joined %v", r, c.joinDone, c.lastJoined, c.idle, l.ns[r].joined)
		}
	}
	for r, c := range l.cycle() {
		if !c.idle {
			t.Fatalf("rank %d not idle after the join", r)
		}
	}
}
