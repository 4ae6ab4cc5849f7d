//go:build cuda

package hvd

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/kernels/cuda"
)

// deviceOp runs body on its own goroutine ("hvd-device-<op>") as a device
// operation on name and returns the handle that completes with it.
func (r *Runtime) deviceOp(op, name string, body func(ctx *cuda.Context) error) *Handle {
	if err := r.begin(op, name); err != nil {
		return failedHandle(name, err)
	}
	done := make(chan struct{})
	var err error
	go func() { // "hvd-device-<op>", owned by the runtime: Shutdown waits for it
		defer r.end(name)
		defer close(done)
		ctx, gerr := r.gpu()
		if gerr != nil {
			err = gerr
			return
		}
		if err = body(ctx); err != nil {
			err = r.wrap(op, name, err)
		}
	}()
	return &Handle{name: name, done: done, result: func() (*Tensor, error) { return nil, err }}
}

// pipeline is one staged operation: what its spans ask of the engine, and
// what happens to a span on this rank before and after it crosses the
// network.
type pipeline struct {
	t     *DeviceTensor
	spans []span
	kind  engine.Kind
	op    kernels.Op // of an all-reduce
	root  int        // of a broadcast
	down  bool       // copy spans device to host (all-reduce, broadcast root)
	pre   float64    // scale applied on the GPU before a span goes down (1: none)
	post  float64    // scale applied on the GPU after a span came up (1: none)
}

func (r *Runtime) allreduceDevice(t *DeviceTensor, op kernels.Op, o ReduceOptions) *Handle {
	p := pipeline{t: t, spans: r.spansOf(t), kind: engine.KindAllreduce,
		op: op, down: true, pre: orOne(o.Prescale), post: orOne(o.Postscale)}
	if op == kernels.Average { // sum on the way, divide on the GPU
		p.op, p.post = kernels.Sum, p.post/float64(r.Size())
	}
	return r.deviceOp("allreduce", t.Name, func(ctx *cuda.Context) error { return r.run(ctx, p) })
}

func (r *Runtime) broadcastDevice(t *DeviceTensor, root int) *Handle {
	p := pipeline{t: t, spans: r.spansOf(t), kind: engine.KindBroadcast,
		root: root, down: r.Rank() == root, pre: 1, post: 1}
	return r.deviceOp("broadcast", t.Name, func(ctx *cuda.Context) error { return r.run(ctx, p) })
}

// spansOf cuts t into the spans it is staged in, of the runtime's
// staging size.
func (r *Runtime) spansOf(t *DeviceTensor) []span {
	return stageSpans(t.Bytes(), t.DType.Size(), r.dev.stageBytes())
}

func orOne(f float64) float64 {
	if f == 0 {
		return 1
	}
	return f
}

// request is the engine request of span i of p (of an empty tensor if p
// has no spans): a vector of the span's elements under the span's name.
func (p pipeline) request(i int) engine.Request {
	n, count := len(p.spans), 0
	if n == 0 {
		n = 1
	} else {
		count = p.spans[i].n / p.t.DType.Size()
	}
	return engine.Request{Name: spanName(p.t.Name, i, n), Kind: p.kind, DType: p.t.DType,
		Shape: []int{count}, ReduceOp: p.op, Root: p.root}
}

// run moves p's spans through a stager, keeping the network busy: span
// i+1 is copied down and queued in the engine while span i crosses the
// network, so the engine starts it as soon as span i is done, and span i
// goes back up meanwhile:
//
//	down(0) submit(0) down(1) | submit(1) wait(0) up(0) down(2) | submit(2) wait(1) up(1) down(3) | ...
//
// At most two spans are in the engine at a time, one running and one
// queued, and spans of a MiB or more are never packed into the fusion
// buffer (collective's soloBytes), so no copy undoes the pipelining.
//
// A CUDA failure on this rank aborts the communicator, as a broken link
// would: the other ranks' spans of this tensor would otherwise wait for
// this rank's forever.
func (r *Runtime) run(ctx *cuda.Context, p pipeline) (err error) {
	n := len(p.spans)
	if n == 0 { // an empty tensor still meets its peers, as host tensors do
		return r.waitEngine(r.engine.Submit(p.request(0), []byte{}))
	}
	s, err := r.takeStager(ctx, p.spans[0].n)
	if err != nil {
		return r.abort(p, err)
	}
	hs := make([]*engine.Handle, n)
	defer func() {
		// Leave no engine operation or copy using the slots before reuse.
		for _, h := range hs {
			if h != nil {
				<-h.Done()
			}
		}
		e1, e2 := s.down.Synchronize(), s.up.Synchronize()
		if e1 != nil || e2 != nil {
			s.close(ctx) // a broken stream is not reused
			err = firstErr(err, r.abort(p, firstErr(e1, e2)))
			return
		}
		r.giveStager(s)
	}()
	submit := func(i int) error {
		if err := s.down.Synchronize(); err != nil {
			return err
		}
		hs[i] = r.engine.Submit(p.request(i), r.slot(s, p, i))
		return nil
	}
	err = r.stageDown(ctx, s, p, 0)
	if err == nil {
		err = submit(0)
	}
	if err == nil && n > 1 {
		err = r.stageDown(ctx, s, p, 1)
	}
	if err != nil {
		return r.abort(p, err)
	}
	for i := range n {
		if i+1 < n {
			if err := submit(i + 1); err != nil {
				return r.abort(p, err)
			}
		}
		if err := r.waitEngine(hs[i]); err != nil {
			return err // the engine's failure, already every rank's
		}
		if err := r.stageUp(ctx, s, p, i); err != nil {
			return r.abort(p, err)
		}
		if i+2 < n {
			if err := r.stageDown(ctx, s, p, i+2); err != nil {
				return r.abort(p, err)
			}
		}
	}
	return nil
}

// abort fails the communicator with a CUDA failure of p on this rank, so
// that every rank's operations end with it, and returns it.
func (r *Runtime) abort(p pipeline, err error) error {
	err = fmt.Errorf("hvd: rank %d: staging %v of device tensor %q: %w", r.Rank(), p.kind, p.t.Name, err)
	r.comm.Abort(err)
	return err
}

// slot is span i's page-locked host buffer.
func (r *Runtime) slot(s *stager, p pipeline, i int) []byte {
	return s.slots[i%len(s.slots)].Bytes()[:p.spans[i].n]
}

// stageDown enqueues span i's copy device to host (after the copy up that
// last used its slot, and after the prescale), if p copies down.
func (r *Runtime) stageDown(ctx *cuda.Context, s *stager, p pipeline, i int) error {
	if !p.down {
		return nil
	}
	k := i % len(s.slots)
	if i >= len(s.slots) {
		if err := s.down.WaitEvent(s.freed[k]); err != nil {
			return err
		}
	}
	sp, dt := p.spans[i], p.t.DType
	ptr := p.t.Ptr + uintptr(sp.off)
	if p.pre != 1 {
		if err := ctx.Scale(s.down, dt, ptr, sp.n/dt.Size(), p.pre); err != nil {
			return err
		}
	}
	return s.down.CopyDtoH(r.slot(s, p, i), ptr)
}

// stageUp enqueues span i's copy host to device, the postscale, and the
// event that frees its slot.
func (r *Runtime) stageUp(ctx *cuda.Context, s *stager, p pipeline, i int) error {
	sp, dt := p.spans[i], p.t.DType
	ptr := p.t.Ptr + uintptr(sp.off)
	if err := s.up.CopyHtoD(ptr, r.slot(s, p, i)); err != nil {
		return err
	}
	if p.post != 1 {
		if err := ctx.Scale(s.up, dt, ptr, sp.n/dt.Size(), p.post); err != nil {
			return err
		}
	}
	return s.up.Record(s.freed[i%len(s.slots)])
}

// waitEngine waits for an engine operation; every engine operation ends
// (Shutdown and failures end the pending ones).
func (r *Runtime) waitEngine(h *engine.Handle) error {
	<-h.Done()
	return h.Err()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) allgatherDevice(ctx context.Context, t *DeviceTensor) (*DeviceTensor, error) {
	var out *DeviceTensor
	h := r.deviceOp("allgather", t.Name, func(g *cuda.Context) error {
		var err error
		out, err = r.gatherStaged(g, t)
		return err
	})
	if err := h.Wait(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// gatherStaged copies t to host memory, all-gathers it under t's own name
// (so shape mismatches are reported as for host tensors) and copies the
// result to a new device tensor. A CUDA failure before the all-gather
// aborts the communicator (the peers would wait for this rank's rows);
// one after it fails this rank's call alone.
func (r *Runtime) gatherStaged(g *cuda.Context, t *DeviceTensor) (*DeviceTensor, error) {
	req := engine.Request{Name: t.Name, Kind: engine.KindAllgather, DType: t.DType, Shape: t.Shape}
	st, err := g.NewStream()
	if err == nil {
		defer st.Close()
	}
	host := make([]byte, t.Bytes())
	if err == nil && len(host) > 0 {
		if err = st.CopyDtoH(host, t.Ptr); err == nil {
			err = st.Synchronize()
		}
	}
	if err != nil {
		return nil, r.abort(pipeline{t: t, kind: req.Kind}, err)
	}
	h := r.engine.Submit(req, host)
	if err := r.waitEngine(h); err != nil {
		return nil, err
	}
	data, shape := h.Output()
	out := &DeviceTensor{Name: t.Name, DType: t.DType, Shape: shape}
	if err := r.allocDevice(out); err != nil {
		return nil, err
	}
	if len(data) > 0 {
		err := st.CopyHtoD(out.Ptr, data)
		if err == nil {
			err = st.Synchronize()
		}
		if err != nil {
			r.freeDevice(out)
			return nil, fmt.Errorf("copying the result to the device: %w", err)
		}
	}
	return out, nil
}
