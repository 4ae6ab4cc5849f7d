package tcptransport

import (
	"context"
	"io"
	"runtime"
	"sync/atomic"
)

// closeOnDone closes c if ctx ends before release is called. release
// reports whether c was left open; if ctx did end, release first waits for
// the close, so no goroutine started here outlives it. The handshakes use
// it: a socket closed under a blocked read ends that read at once.
func closeOnDone(ctx context.Context, c io.Closer) (release func() (open bool)) {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		c.Close()
	})
	return func() bool {
		if stop() {
			return true
		}
		<-done
		return false
	}
}

// ctxWatch fails one direction of a conn when the context of the call in
// progress ends. Each conn has one per direction. A context stays watched
// after its call, until calls under two others have come since or the conn
// fails, so calls under long-lived contexts (an engine's, which alternates
// two: its negotiation's and its data's; a training loop's) register each
// once and then cost two atomic operations; a context that can never end
// costs nothing. The end of a context between calls fails nothing: the next
// call under it finds it ended (see conn.ready).
type ctxWatch struct {
	c     *conn
	op    string       // opSend or opRecv
	slots [2]watchSlot // the watched contexts, the last used first
	gen   uint64       // the generation of the newest registration
	cur   uint64       // the generation of the current call's context
	// state is cur<<2 | the phase of the current call: watchIdle between
	// calls, watchCalling during one, watchFiring while the end of its
	// context fails the link. A fire of another generation finds it
	// different and does nothing.
	state atomic.Uint64
}

// watchSlot is one watched context.
type watchSlot struct {
	ctx  context.Context // nil when the slot is free
	stop func() bool     // detaches the watch
	gen  uint64
}

const (
	watchIdle = iota
	watchCalling
	watchFiring
	watchPhases = 4 // the phase takes the state's low two bits
)

func (w *ctxWatch) init(c *conn, op string) {
	w.c, w.op = c, op
}

// begin watches ctx for the call that starts now.
func (w *ctxWatch) begin(ctx context.Context) {
	if ctx.Done() == nil {
		return
	}
	switch ctx {
	case w.slots[0].ctx:
	case w.slots[1].ctx:
		w.slots[0], w.slots[1] = w.slots[1], w.slots[0]
	default:
		w.slots[1].detach()
		w.gen++
		gen := w.gen
		w.slots[1] = w.slots[0]
		w.slots[0] = watchSlot{ctx: ctx, gen: gen, stop: context.AfterFunc(ctx, func() { w.expire(ctx, gen) })}
	}
	w.cur = w.slots[0].gen
	w.state.Store(w.cur*watchPhases + watchCalling)
	if ctx.Err() != nil { // ended before the call was marked: its fire saw no call
		w.expire(ctx, w.cur)
	}
}

// expire fails the link if a call under the context of generation gen is
// in progress.
func (w *ctxWatch) expire(ctx context.Context, gen uint64) {
	if w.state.CompareAndSwap(gen*watchPhases+watchCalling, gen*watchPhases+watchFiring) {
		w.c.fail(ctxError(ctx, w.c.where(w.op)))
		w.state.Store(gen*watchPhases + watchIdle)
	}
}

// end marks the call over. If its context ended meanwhile, end waits until
// the link is failed, so the failure is in place when the call returns. A
// failed conn stops watching.
func (w *ctxWatch) end() {
	if w.cur == 0 {
		return
	}
	calling := w.cur*watchPhases + watchCalling
	if !w.state.CompareAndSwap(calling, calling-watchCalling) {
		for w.state.Load() == w.cur*watchPhases+watchFiring {
			runtime.Gosched()
		}
	}
	w.cur = 0
	if w.c.failed.Load() != nil {
		w.slots[0].detach()
		w.slots[1].detach()
	}
}

// detach stops watching the slot's context; a fire already under way
// finds the state of another generation.
func (s *watchSlot) detach() {
	if s.stop != nil {
		s.stop()
	}
	*s = watchSlot{}
}
