package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// member is a 4-byte all-reduce in group 7 of two.
func member(name string, n int) Request {
	r := ar(name, n)
	r.Group, r.GroupSize = 7, 2
	return r
}

// TestNegotiatorGroups: a grouped all-reduce is held until every member is
// decided and then runs as one batch; when one member fails, both do.
func TestNegotiatorGroups(t *testing.T) {
	for _, c := range []struct {
		name  string
		odd   int   // rank 1's element count of g2
		err   error // of g1 and g2
		plan2 string
	}{
		{"complete", 1, nil, "[[s g1 g2]]"},
		{"one member fails", 2, ErrMismatch, "[[s] [g1] [g2]]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLockstep(t, 2, tuning{fusion: 1 << 10})
			l.submitAll(member("g1", 1))
			if cs := l.cycle(); firedNames(t, cs) != "[]" || len(l.ns[0].held[7]) != 1 {
				t.Fatalf("g1 was not held: %s", names(cs[0].tasks))
			}
			l.submit(0, ar("s", 1), member("g2", 1))
			l.submit(1, ar("s", 1), member("g2", c.odd))
			cs := l.cycle()
			plan := sameOnEveryRank(t, cs, "plan", func(c rankCycle) string { return planNames(c.decision) })
			if plan != c.plan2 || firedNames(t, cs) != "[s g1 g2]" {
				t.Fatalf("decided %s as %s, want %s", names(cs[0].tasks), plan, c.plan2)
			}
			for r, rc := range cs {
				g1, g2 := rc.tasks[1], rc.tasks[2]
				if !errors.Is(g1.err, c.err) || !errors.Is(g2.err, c.err) || (c.err != nil && !strings.Contains(g1.err.Error(), `grouped with "g2"`)) {
					t.Fatalf("rank %d: g1 %v, g2 %v, want %v", r, g1.err, g2.err, c.err)
				}
			}
		})
	}
}

// TestNegotiatorFusionPlan: the decided tasks come planned into batches:
// all-reduces of one class packed up to the threshold, other operations
// alone, the same on every rank.
func TestNegotiatorFusionPlan(t *testing.T) {
	f64 := ar("d", 2)
	f64.DType = kernels.F64
	bcast := Request{Name: "x", Kind: KindBroadcast, DType: kernels.F32, Shape: []int{1}}
	reqs := []Request{ar("a", 4), ar("b", 4), ar("c", 10), f64, ar("e", 2), bcast}
	for _, c := range []struct {
		threshold int64
		want      string
	}{
		{0, "[[a] [b] [c] [d] [e] [x]]"},
		{48, "[[a b] [c e] [d] [x]]"},
		{72, "[[a b c] [d] [e] [x]]"},
		{1 << 20, "[[a b c e] [d] [x]]"},
	} {
		t.Run(fmt.Sprint(c.threshold), func(t *testing.T) {
			l := newLockstep(t, 3, tuning{fusion: c.threshold})
			l.submit(0, reqs...)
			l.submit(1, reqs[3:]...)
			l.submit(1, reqs[:3]...)
			l.submit(2, reqs...)
			cs := l.cycle()
			plan := sameOnEveryRank(t, cs, "plan", func(c rankCycle) string { return planNames(c.decision) })
			if plan != c.want {
				t.Fatalf("plan %s, want %s", plan, c.want)
			}
		})
	}
}
