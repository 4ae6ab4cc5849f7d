package engine

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/collective"
)

// perform executes a cycle's decision: its batches in the planned order
// (fused all-reduces, the other operations one by one), completing the
// tasks; the members of a group complete together, after the whole cycle.
func (e *Engine) perform(ctx context.Context, d *decision) error {
	if len(d.tasks) == 0 {
		return nil
	}
	e.running = d.tasks // failed by stopWith if the cycle breaks
	for _, idx := range d.plan {
		batch := make([]*task, len(idx))
		for i, j := range idx {
			batch[i] = d.tasks[j]
		}
		if err := e.runBatch(ctx, batch); err != nil {
			return err
		}
		for _, t := range batch {
			if t.resp.req.Group == 0 {
				e.complete(t)
			}
		}
	}
	for _, t := range d.tasks {
		if !t.done {
			e.complete(t)
		}
	}
	e.running = nil
	return nil
}

// complete finishes a task's handle (if this rank submitted it).
func (e *Engine) complete(t *task) {
	t.done = true
	e.tlEnd(t)
	if t.en != nil {
		e.finish(t.en, t.out, t.shape, t.err)
	}
}

// runBatch executes one planned batch; an error fails the engine.
func (e *Engine) runBatch(ctx context.Context, batch []*task) error {
	t := batch[0]
	e.tlBegin(batch)
	if t.err != nil {
		return nil
	}
	ctx = e.deadline.arm(ctx)
	defer e.deadline.disarm()
	switch t.resp.req.Kind {
	case KindAllreduce:
		return e.allreduce(ctx, batch)
	case KindBarrier:
		return nil // negotiation alone proves that every rank arrived
	}
	if t.en == nil {
		err := fmt.Errorf("collective: %v %q on rank %d: %w: ready without a local request", t.resp.req.Kind, t.resp.name, e.rank, collective.ErrProtocol)
		e.c.Abort(err)
		return err
	}
	start := e.tlNow()
	err := e.single(ctx, t)
	e.tlSpan(batch, tlCollective+t.resp.req.Kind.upper(), start, e.tlNow())
	return err
}

// allreduce reduces a batch: a single tensor in place, several packed into
// the reused fusion buffer.
func (e *Engine) allreduce(ctx context.Context, batch []*task) error {
	req := &batch[0].resp.req
	o := collective.ReduceOptions{Prescale: req.Prescale, Postscale: req.Postscale}
	e.countBatch(len(batch))
	if len(batch) == 1 {
		t := batch[0]
		buf := t.buffer()
		start := e.tlNow()
		err := e.c.Allreduce(ctx, req.DType, buf, req.ReduceOp, o)
		e.tlSpan(batch, tlCollective+"ALLREDUCE", start, e.tlNow())
		if t.en != nil {
			t.out, t.shape = buf, t.en.req.Shape
		}
		return err
	}
	total := 0
	for _, t := range batch {
		total += t.resp.req.Bytes()
	}
	if cap(e.fusion) < total {
		e.fusion = make([]byte, total)
	}
	buf := e.fusion[:total]
	t0 := e.tlNow()
	e.pack(batch, buf)
	t1 := e.tlNow()
	err := e.c.Allreduce(ctx, req.DType, buf, req.ReduceOp, o)
	t2 := e.tlNow()
	if err != nil {
		return err
	}
	e.unpack(batch, buf)
	e.tlSpan(batch, tlMemcpyIn, t0, t1)
	e.tlSpan(batch, tlCollective+"ALLREDUCE", t1, t2)
	e.tlSpan(batch, tlMemcpyOut, t2, e.tlNow())
	return nil
}

// buffer is the task's data, or zeros of the negotiated size on a rank
// without a submission of its own (a joined rank).
func (t *task) buffer() []byte {
	if t.en != nil {
		return t.en.data
	}
	return make([]byte, t.resp.req.Bytes())
}

func (e *Engine) pack(batch []*task, buf []byte) {
	off := 0
	for _, t := range batch {
		n := t.resp.req.Bytes()
		if t.en != nil {
			copy(buf[off:off+n], t.en.data)
		} else {
			clear(buf[off : off+n])
		}
		off += n
	}
}

func (e *Engine) unpack(batch []*task, buf []byte) {
	off := 0
	for _, t := range batch {
		n := t.resp.req.Bytes()
		if t.en != nil {
			copy(t.en.data, buf[off:off+n])
			t.out, t.shape = t.en.data, t.en.req.Shape
		}
		off += n
	}
}

func (e *Engine) countBatch(n int) {
	e.mu.Lock()
	e.stats.Batches++
	e.stats.Tensors += uint64(n)
	e.mu.Unlock()
}
