package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// perform executes a cycle's decision: its batches in the planned order
// (fused all-reduces, the other operations one by one), completing the
// tasks; the members of a group complete together, after the whole cycle.
//
// start is when the decision was made: each batch's time, for Stats.Kinds,
// runs from the end of the one before (one clock read a batch).
func (e *Engine) perform(ctx context.Context, d *decision, start time.Time) error {
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
		end := e.now()
		e.countKind(batch, end.Sub(start))
		start = end
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
		err := fmt.Errorf("engine: %v %q on rank %d: %w: ready without a local request", t.resp.req.Kind, t.resp.name, e.rank, collective.ErrProtocol)
		e.c.Abort(err)
		return err
	}
	start := e.tlNow()
	err := e.single(ctx, t)
	e.tlSpan(batch, tlCollective+t.resp.req.Kind.upper(), start, e.tlNow())
	return err
}

// allreduce reduces a batch in place, where its tensors lie: a single
// tensor with Comm.Allreduce, several fused into one operation over their
// concatenation with Comm.AllreduceVec (the same schedule and result as
// packing them into one buffer, without the two copies of every byte that
// packing and unpacking cost; a joined rank's zeros are one of the parts).
func (e *Engine) allreduce(ctx context.Context, batch []*task) error {
	req := &batch[0].resp.req
	o := collective.ReduceOptions{Prescale: req.Prescale, Postscale: req.Postscale}
	e.countBatch(len(batch))
	var err error
	start := e.tlNow()
	if len(batch) == 1 {
		err = e.c.Allreduce(ctx, req.DType, batch[0].buffer(), req.ReduceOp, o)
	} else {
		parts := e.parts[:0]
		for _, t := range batch {
			parts = append(parts, t.buffer())
		}
		err = e.c.AllreduceVec(ctx, req.DType, parts, req.ReduceOp, o)
		clear(parts) // keep no tensor reachable
		e.parts = parts[:0]
	}
	e.tlSpan(batch, tlCollective+"ALLREDUCE", start, e.tlNow())
	if err != nil {
		return err
	}
	for _, t := range batch {
		if t.en != nil {
			t.out, t.shape = t.en.data, t.en.req.Shape
		}
	}
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

// countKind adds a batch that took d to the statistics of its kind
// (Stats.Kinds).
func (e *Engine) countKind(batch []*task, d time.Duration) {
	var n uint64
	for _, t := range batch {
		n += uint64(t.resp.req.Bytes())
	}
	k := batch[0].resp.req.Kind
	if !k.Valid() {
		return
	}
	e.mu.Lock()
	ks := &e.stats.Kinds[k]
	ks.Tensors += uint64(len(batch))
	ks.Bytes += n
	ks.Time += d
	e.mu.Unlock()
}

func (e *Engine) countBatch(n int) {
	e.mu.Lock()
	e.stats.Batches++
	e.stats.Tensors += uint64(n)
	e.mu.Unlock()
}
