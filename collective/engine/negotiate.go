package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// response is the decision for one tensor name, the same on every rank.
type response struct {
	name   string
	req    Request // the canonical request: the lowest submitting rank's
	err    error   // set when the ranks disagree or a request is invalid
	rows   []int   // all-gather: every rank's first dimension
	splits [][]int // all-to-all: every rank's resolved splits
	// seen holds, per rank, when its request reached the table (zero: it
	// did not submit); nil for responses from the cache.
	seen []time.Time
}

// table is the message table: which ranks have submitted which names.
// Every rank keeps an identical copy, fed by the same gathered requests in
// the same order, so every rank reaches the same decisions.
type table struct {
	size    int
	entries map[string]*tableEntry
	seq     uint64
}

type tableEntry struct {
	name  string
	seq   uint64      // insertion order: the order of responses
	reqs  []*Request  // per rank; nil where the rank has not submitted
	seen  []time.Time // per rank: when its request arrived
	count int         // ranks that have submitted
}

func newTable(size int) *table {
	return &table{size: size, entries: map[string]*tableEntry{}}
}

// add records rank's request, seen at the given time. A second request for
// a name from the same rank is ignored (the engine never sends one).
func (t *table) add(rank int, r Request, seen time.Time) {
	e := t.entries[r.Name]
	if e == nil {
		t.seq++
		e = &tableEntry{name: r.Name, seq: t.seq, reqs: make([]*Request, t.size), seen: make([]time.Time, t.size)}
		t.entries[r.Name] = e
	}
	if e.reqs[rank] != nil {
		return
	}
	e.reqs[rank], e.seen[rank] = &r, seen
	e.count++
}

// has reports whether any rank's request for name is waiting in the table.
func (t *table) has(name string) bool { return t.entries[name] != nil }

// len is the number of names waiting.
func (t *table) len() int { return len(t.entries) }

// waiting returns the entries in insertion order.
func (t *table) waiting() []*tableEntry {
	out := make([]*tableEntry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *tableEntry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// ready removes and resolves, in insertion order, every name that all
// ranks not in joined have submitted. With every rank joined nothing is
// ready.
func (t *table) ready(joined []bool) []*response {
	if len(t.entries) == 0 {
		return nil // a cycle of cache hits only
	}
	active := 0
	for _, j := range joined {
		if !j {
			active++
		}
	}
	if active == 0 {
		return nil
	}
	var out []*response
	for _, e := range t.waiting() {
		n := 0
		for r, req := range e.reqs {
			if req != nil && !joined[r] {
				n++
			}
		}
		if n == active {
			delete(t.entries, e.name)
			out = append(out, resolve(e, t.size))
		}
	}
	return out
}

// resolve checks that every submitted request is valid and agrees with the
// first one, and builds the response.
func resolve(e *tableEntry, size int) *response {
	resp := &response{name: e.name, seen: e.seen}
	first := -1
	for r, req := range e.reqs {
		if req == nil {
			continue
		}
		if err := req.check(size); err != nil {
			resp.err = fmt.Errorf("engine: tensor %q: rank %d: %w: %w", e.name, r, collective.ErrInvalid, err)
			return resp
		}
		if first < 0 {
			first, resp.req = r, *req
			continue
		}
		if err := agree(e.name, first, e.reqs[first], r, req); err != nil {
			resp.err = err
			return resp
		}
	}
	fillLayout(resp, e.reqs, size)
	return resp
}

// fillLayout records the per-rank layout that all-gather and all-to-all
// need to size their outputs.
func fillLayout(resp *response, reqs []*Request, size int) {
	switch resp.req.Kind {
	case KindAllgather:
		resp.rows = make([]int, size)
		for r, req := range reqs {
			if req != nil {
				resp.rows[r] = req.rows()
			}
		}
	case KindAlltoall:
		resp.splits = make([][]int, size)
		for r, req := range reqs {
			if req != nil {
				resp.splits[r], _ = req.splits(size) // checked by resolve
			} else {
				resp.splits[r] = make([]int, size)
			}
		}
	}
}

// agree returns a *MismatchError for the first field in which rank b's
// request differs from rank a's, or nil.
func agree(name string, ra int, a *Request, rb int, b *Request) error {
	diff := func(field, va, vb string) error {
		return &MismatchError{Name: name, Field: field, RankA: ra, ValueA: va, RankB: rb, ValueB: vb}
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch {
	case a.Kind != b.Kind:
		return diff("operation", a.Kind.String(), b.Kind.String())
	case a.DType != b.DType && a.Kind != KindBarrier:
		return diff("dtype", a.DType.String(), b.DType.String())
	case a.Kind.reduces() && a.ReduceOp != b.ReduceOp:
		return diff("reduce op", a.ReduceOp.String(), b.ReduceOp.String())
	case a.Kind == KindBroadcast && a.Root != b.Root:
		return diff("root", strconv.Itoa(a.Root), strconv.Itoa(b.Root))
	case a.Kind.reduces() && a.Prescale != b.Prescale:
		return diff("prescale", g(a.Prescale), g(b.Prescale))
	case a.Kind.reduces() && a.Postscale != b.Postscale:
		return diff("postscale", g(a.Postscale), g(b.Postscale))
	case a.Group != b.Group || a.GroupSize != b.GroupSize:
		return diff("group", groupString(a), groupString(b))
	case !shapesAgree(a, b):
		return diff("shape", fmt.Sprint(a.Shape), fmt.Sprint(b.Shape))
	}
	return nil
}

func groupString(r *Request) string {
	if r.Group == 0 {
		return "no group"
	}
	return fmt.Sprintf("group %d of %d", r.Group, r.GroupSize)
}

// shapesAgree: equal shapes, except that all-gather and all-to-all ranks
// may differ in the first dimension.
func shapesAgree(a, b *Request) bool {
	switch a.Kind {
	case KindBarrier:
		return true
	case KindAllgather, KindAlltoall:
		return len(a.Shape) == len(b.Shape) && len(a.Shape) > 0 && slices.Equal(a.Shape[1:], b.Shape[1:])
	}
	return slices.Equal(a.Shape, b.Shape)
}
