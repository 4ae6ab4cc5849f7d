package engine

import (
	"context"
	"strings"

	"github.com/gorovod/gorovod/collective"
)

func (k Kind) upper() string { return strings.ToUpper(k.String()) }

// single runs one broadcast, all-gather, all-to-all or reduce-scatter with
// this rank's submission t.en, sized from the negotiated response.
func (e *Engine) single(ctx context.Context, t *task) error {
	switch t.resp.req.Kind {
	case KindBroadcast:
		t.out, t.shape = t.en.data, t.en.req.Shape
		return e.c.Broadcast(ctx, t.en.data, t.resp.req.Root)
	case KindAllgather:
		return e.allgather(ctx, t)
	case KindAlltoall:
		return e.alltoall(ctx, t)
	case KindReducescatter:
		return e.reducescatter(ctx, t)
	}
	return nil
}

// allgather concatenates every rank's rows, in rank order.
func (e *Engine) allgather(ctx context.Context, t *task) error {
	req := &t.en.req
	per, esz := req.rowElems(), req.DType.Size()
	counts, total, off := make([]int, e.size), 0, 0
	for r, rows := range t.resp.rows {
		counts[r] = rows * per
		if r == e.rank {
			off = total
		}
		total += rows
	}
	out := req.Out
	if len(out) != total*per*esz {
		out = make([]byte, total*per*esz)
	}
	copy(out[off*per*esz:], t.en.data)
	if err := e.c.Allgather(ctx, req.DType, out, counts); err != nil {
		return err
	}
	t.out, t.shape = out, append([]int{total}, req.Shape[1:]...)
	return nil
}

// alltoall sends splits[me][p] rows to rank p and receives splits[p][me]
// rows from each rank p, in rank order.
func (e *Engine) alltoall(ctx context.Context, t *task) error {
	req := &t.en.req
	per := req.rowElems()
	sc, rc, total := make([]int, e.size), make([]int, e.size), 0
	for p := range e.size {
		sc[p] = t.resp.splits[e.rank][p] * per
		rc[p] = t.resp.splits[p][e.rank] * per
		total += t.resp.splits[p][e.rank]
	}
	out := make([]byte, total*per*req.DType.Size())
	if err := e.c.Alltoall(ctx, req.DType, t.en.data, sc, out, rc); err != nil {
		return err
	}
	t.out, t.shape = out, append([]int{total}, req.Shape[1:]...)
	return nil
}

// reducescatter reduces a copy of the data (the data itself with Clobber)
// and keeps this rank's share of the rows (split as evenly as possible,
// earlier ranks taking the extra).
func (e *Engine) reducescatter(ctx context.Context, t *task) error {
	req := &t.en.req
	per, esz, rows := req.rowElems(), req.DType.Size(), req.rows()
	counts, off, myRows := make([]int, e.size), 0, 0
	for i := range counts {
		n := rows / e.size
		if i < rows%e.size {
			n++
		}
		counts[i] = n * per
		if i < e.rank {
			off += counts[i]
		}
		if i == e.rank {
			myRows = n
		}
	}
	work := t.en.data
	if !req.Clobber {
		work = append([]byte(nil), work...)
	}
	o := collective.ReduceOptions{Prescale: req.Prescale, Postscale: req.Postscale}
	if err := e.c.ReduceScatter(ctx, req.DType, work, counts, req.ReduceOp, o); err != nil {
		return err
	}
	mine := counts[e.rank]
	t.out = work[off*esz : (off+mine)*esz]
	t.shape = append([]int{myRows}, req.Shape[1:]...)
	return nil
}
