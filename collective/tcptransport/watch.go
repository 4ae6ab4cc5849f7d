package tcptransport

import (
	"context"
	"io"
	"sync"
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
// progress ends. Each conn has one per direction, reused call after call,
// so watching a context costs one context.AfterFunc and nothing else; a
// context that can never end costs nothing.
type ctxWatch struct {
	c    *conn
	op   string          // opSend or opRecv
	fire func()          // w.expire, bound once so calls do not allocate it
	ctx  context.Context // the watched call's context, read by fire
	stop func() bool     // detaches fire; nil when nothing is watched
	wg   sync.WaitGroup  // counts a fire that may run
}

func (w *ctxWatch) init(c *conn, op string) {
	w.c, w.op = c, op
	w.fire = w.expire
}

func (w *ctxWatch) expire() {
	defer w.wg.Done()
	w.c.fail(ctxError(w.ctx, w.c.where(w.op)))
}

// begin watches ctx until end.
func (w *ctxWatch) begin(ctx context.Context) {
	if ctx.Done() == nil {
		return
	}
	w.ctx = ctx
	w.wg.Add(1)
	w.stop = context.AfterFunc(ctx, w.fire)
}

// end stops watching. If the context ended meanwhile, end waits until the
// link is failed, so no goroutine outlives the call.
func (w *ctxWatch) end() {
	if w.stop == nil {
		return
	}
	if w.stop() {
		w.wg.Done()
	} else {
		w.wg.Wait()
	}
	w.stop, w.ctx = nil, nil
}
