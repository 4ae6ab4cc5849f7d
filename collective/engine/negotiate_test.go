package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

func ar(name string, shape ...int) Request {
	return Request{Name: name, Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: shape}
}

var t0 = time.Unix(1000, 0)

func TestTableReadiness(t *testing.T) {
	tb := newTable(3)
	none := []bool{false, false, false}
	tb.add(0, ar("a", 2), t0)
	tb.add(2, ar("b", 2), t0)
	tb.add(1, ar("a", 2), t0)
	if got := tb.ready(none); len(got) != 0 {
		t.Fatalf("ready before every rank submitted: %v", got)
	}
	tb.add(2, ar("a", 2), t0.Add(time.Second))
	tb.add(2, ar("a", 99), t0) // a second request from a rank is ignored
	got := tb.ready(none)
	if len(got) != 1 || got[0].name != "a" || got[0].err != nil || !got[0].seen[2].Equal(t0.Add(time.Second)) {
		t.Fatalf("got %+v", got)
	}
	if tb.has("a") || !tb.has("b") || tb.len() != 1 {
		t.Fatal("a should have left the table, b stayed")
	}
	// Rank 0 and 1 join: b (submitted by rank 2 only) becomes ready.
	if got := tb.ready([]bool{true, true, false}); len(got) != 1 || got[0].name != "b" {
		t.Fatalf("with ranks 0 and 1 joined: %+v", got)
	}
	tb.add(0, ar("c", 1), t0)
	if got := tb.ready([]bool{true, true, true}); len(got) != 0 {
		t.Fatalf("with every rank joined nothing is ready: %+v", got)
	}
}

// TestTableOrder: responses come in the order names entered the table,
// whatever order the ranks submitted them in.
func TestTableOrder(t *testing.T) {
	tb := newTable(2)
	for _, n := range []string{"z", "a", "m", "b"} {
		tb.add(0, ar(n, 1), t0)
	}
	for _, n := range []string{"b", "m", "a", "z"} {
		tb.add(1, ar(n, 1), t0)
	}
	var order []string
	for _, r := range tb.ready([]bool{false, false}) {
		order = append(order, r.name)
	}
	if fmt.Sprint(order) != "[z a m b]" {
		t.Fatalf("order %v", order)
	}
}

func TestResolveMismatches(t *testing.T) {
	bc := func(root int) Request {
		return Request{Name: "x", Kind: KindBroadcast, DType: kernels.F32, Shape: []int{2}, Root: root}
	}
	ag := func(shape ...int) Request {
		return Request{Name: "x", Kind: KindAllgather, DType: kernels.F32, Shape: shape}
	}
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	x := ar("x", 3, 4)
	for _, c := range []struct {
		reqs []Request // one per rank, Name "" = not submitted
		want string
	}{
		{[]Request{x, x, x}, ""},
		{[]Request{x, x, ar("x", 4, 3)}, `engine: tensor "x": shape mismatch: rank 0 has [3 4], rank 2 has [4 3]`},
		{[]Request{{}, x, ar("x", 12)}, `engine: tensor "x": shape mismatch: rank 1 has [3 4], rank 2 has [12]`},
		{[]Request{x, with(x, func(r *Request) { r.DType = kernels.F64 }), x}, `dtype mismatch: rank 0 has float32, rank 1 has float64`},
		{[]Request{x, with(x, func(r *Request) { r.ReduceOp = kernels.Average }), x}, `reduce op mismatch: rank 0 has sum, rank 1 has avg`},
		{[]Request{x, x, with(x, func(r *Request) { r.Prescale = 0.5 })}, `prescale mismatch: rank 0 has 0, rank 2 has 0.5`},
		{[]Request{x, x, with(x, func(r *Request) { r.Postscale = 2 })}, `postscale mismatch: rank 0 has 0, rank 2 has 2`},
		{[]Request{x, with(x, func(r *Request) { r.Group, r.GroupSize = 3, 2 }), x}, `group mismatch: rank 0 has no group, rank 1 has group 3 of 2`},
		{[]Request{x, bc(0), x}, `operation mismatch: rank 0 has allreduce, rank 1 has broadcast`},
		{[]Request{bc(1), bc(1), bc(2)}, `root mismatch: rank 0 has 1, rank 2 has 2`},
		{[]Request{ag(1, 2), ag(5, 2), ag(0, 2)}, ""},
		{[]Request{ag(1, 2), ag(1, 3), ag(1, 2)}, `shape mismatch: rank 0 has [1 2], rank 1 has [1 3]`},
		{[]Request{ag(1, 2), ag(1, 2), ag(2)}, `shape mismatch: rank 0 has [1 2], rank 2 has [2]`},
		{[]Request{bc(1), bc(7), bc(1)}, `engine: tensor "x": rank 1: collective: invalid argument: root 7 outside [0, 3)`},
	} {
		e := &tableEntry{name: "x", reqs: make([]*Request, 3), seen: make([]time.Time, 3)}
		for r := range c.reqs {
			if c.reqs[r].Name != "" {
				e.reqs[r] = &c.reqs[r]
			}
		}
		resp := resolve(e, 3)
		switch {
		case c.want == "" && resp.err != nil:
			t.Errorf("%v: unexpected %v", c.reqs, resp.err)
		case c.want != "" && (resp.err == nil || !strings.Contains(resp.err.Error(), c.want)):
			t.Errorf("%v: got %v, want %s", c.reqs, resp.err, c.want)
		case c.want != "" && !errors.Is(resp.err, ErrMismatch) && !errors.Is(resp.err, collective.ErrInvalid):
			t.Errorf("%v: %v wraps neither ErrMismatch nor collective.ErrInvalid", c.reqs, resp.err)
		}
	}
}

// TestResolveLayouts: all-gather records every rank's rows, all-to-all
// every rank's splits (even splits resolved).
func TestResolveLayouts(t *testing.T) {
	tb := newTable(3)
	for r := range 3 {
		tb.add(r, Request{Name: "g", Kind: KindAllgather, DType: kernels.U8, Shape: []int{r * 2, 5}}, t0)
		a := Request{Name: "a", Kind: KindAlltoall, DType: kernels.U8, Shape: []int{6}}
		if r == 1 {
			a.Splits = []int{0, 0, 6}
		}
		tb.add(r, a, t0)
	}
	got := tb.ready(make([]bool, 3))
	if len(got) != 2 || fmt.Sprint(got[0].rows) != "[0 2 4]" || fmt.Sprint(got[1].splits) != "[[2 2 2] [0 0 6] [2 2 2]]" {
		t.Fatalf("rows %v splits %v", got[0].rows, got[1].splits)
	}
}
