package collective

import (
	"context"
	"errors"
	"sync"

	"github.com/gorovod/gorovod/kernels"
)

// scratchSlots is how many received segments may wait for reduction at
// once: the receiver fills one slot while the reducer drains another, so
// receiving, reducing and sending overlap.
const scratchSlots = 4

// run is one execution of a plan over a transport.
type run struct {
	p      *plan
	op     string
	seq    uint64
	bufs   [2][]byte
	vec    *vector // BufMain in parts (AllreduceVec), or nil: bufs[BufMain]
	esz    int
	reduce kernels.ReduceFunc
	c      *Comm // the Comm running it: its transport, its failure, told which peer each step waits for (Comm.waiting)

	sent, recvd progress
	stop        chan struct{}
	stopOnce    sync.Once

	// For a vectored buffer, the pieces of the segment in hand and a
	// buffer to gather or scatter through (a Conn that is not Vectored),
	// one set per goroutine of runPipelined: the sender's, the receiver's,
	// the reducer's.
	sendPs, recvPs, redPs [][]byte
	sendTmp, recvTmp      []byte

	// runExchange's fold of the step in hand, and foldArrived bound to
	// this run once.
	ex   exchangeFold
	fold func(int)
}

// reset clears r for another operation (see call.run) but for the
// storage of its piece lists (emptied, so that they keep no caller's
// buffer alive), its gather buffers and its bound fold.
func (r *run) reset() {
	*r = run{sendPs: emptied(r.sendPs), recvPs: emptied(r.recvPs), redPs: emptied(r.redPs),
		sendTmp: r.sendTmp[:0], recvTmp: r.recvTmp[:0], fold: r.fold}
}

// emptied returns ps with no length, its storage cleared.
func emptied(ps [][]byte) [][]byte {
	clear(ps[:cap(ps)])
	return ps[:0]
}

func (r *run) bytes(s Segment) []byte {
	return r.bufs[s.Buf][s.Off*r.esz : s.end()*r.esz]
}

// inParts reports whether s lies in the vectored buffer.
func (r *run) inParts(s Segment) bool { return r.vec != nil && s.Buf == BufMain }

// parts returns the pieces of s (which lies in the vectored buffer),
// reusing ps's storage.
func (r *run) parts(s Segment, ps [][]byte) [][]byte {
	return r.vec.pieces(s.Off*r.esz, s.end()*r.esz, ps[:0])
}

// grow returns buf resized to n bytes, reallocated if it is too small.
func grow(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, n)
	}
	return buf[:n]
}

// reduceInto folds tmp, the received elements of s, into s.
func (r *run) reduceInto(s Segment, tmp []byte) {
	if !r.inParts(s) {
		r.reduce(r.bytes(s), tmp)
		return
	}
	r.redPs = r.parts(s, r.redPs)
	off := 0
	for _, p := range r.redPs {
		r.reduce(p, tmp[off:off+len(p)])
		off += len(p)
	}
}

// abort stops the run after err: the communicator fails (closing the
// transport unblocks all I/O) and every waiter wakes. An error that only
// says the transport was closed here is not recorded as the cause: whoever
// closed it (a failure on another link of this run, or Close) reports why,
// and a concurrent failure of a link must not be blamed on the closing it
// caused.
func (r *run) abort(err error) {
	if !errors.Is(err, ErrClosed) {
		r.c.fail(err)
	}
	r.stopOnce.Do(func() { close(r.stop) })
	r.sent.abort()
	r.recvd.abort()
}

func (r *run) opError(i, peer int, err error) error {
	return &OpError{Op: r.op, Seq: r.seq, Step: i, Rank: r.c.t.Rank(), Peer: peer, Host: r.c.t.Host(peer), Err: err}
}

// send sends step i's segment; wait lets it wait for the receiver (see
// Rendezvous), which only the pipelined executor's sender may.
func (r *run) send(ctx context.Context, i int, wait bool) error {
	st := r.p.steps[i]
	r.c.waiting(st.SendTo)
	c, tag := r.c.t.Conn(st.SendTo), Tag{Seq: r.seq, Step: r.p.sendTag[i]}
	var err error
	if rv, ok := c.(Rendezvous); ok && wait && !r.inParts(st.Send) {
		err = rv.SendWait(ctx, tag, r.bytes(st.Send))
	} else if !r.inParts(st.Send) {
		err = c.Send(ctx, tag, r.bytes(st.Send))
	} else {
		err = r.sendParts(ctx, c, tag, st.Send)
	}
	if err != nil {
		return r.opError(i, st.SendTo, err)
	}
	return nil
}

// sendParts sends s, which lies in the vectored buffer: as it is when it
// lies in one part, from its parts when the Conn is Vectored, else
// gathered.
func (r *run) sendParts(ctx context.Context, c Conn, tag Tag, s Segment) error {
	ps := r.parts(s, r.sendPs)
	r.sendPs = ps
	if len(ps) == 1 {
		return c.Send(ctx, tag, ps[0])
	}
	if v, ok := c.(Vectored); ok {
		return v.SendVec(ctx, tag, ps)
	}
	r.sendTmp = grow(r.sendTmp, piecesLen(ps))
	gather(r.sendTmp, ps)
	return c.Send(ctx, tag, r.sendTmp)
}

func (r *run) recv(ctx context.Context, i int, into []byte) error {
	st := r.p.steps[i]
	r.c.waiting(st.RecvFrom)
	err := r.c.t.Conn(st.RecvFrom).Recv(ctx, Tag{Seq: r.seq, Step: r.p.recvTag[i]}, into)
	if err != nil {
		return r.opError(i, st.RecvFrom, err)
	}
	return nil
}

// onArrival returns the link of step i's receive, a Reduce, if it folds
// messages into the buffer as they arrive (see ReduceReceiver), or nil.
func (r *run) onArrival(i int) ReduceReceiver {
	st := r.p.steps[i]
	if r.inParts(st.Recv) {
		return nil
	}
	rr, ok := r.c.t.Conn(st.RecvFrom).(ReduceReceiver)
	if !ok || !rr.ReducesOnArrival() {
		return nil
	}
	return rr
}

// recvReduce receives step i's segment on rr and folds it into the buffer
// as it arrives.
func (r *run) recvReduce(ctx context.Context, i int, rr ReduceReceiver) error {
	st := r.p.steps[i]
	r.c.waiting(st.RecvFrom)
	if err := rr.RecvReduce(ctx, Tag{Seq: r.seq, Step: r.p.recvTag[i]}, r.bytes(st.Recv), r.esz, r.reduce); err != nil {
		return r.opError(i, st.RecvFrom, err)
	}
	return nil
}

// recvCopy receives step i's segment straight into the buffer (a Copy
// step).
func (r *run) recvCopy(ctx context.Context, i int) error {
	st := r.p.steps[i]
	if !r.inParts(st.Recv) {
		return r.recv(ctx, i, r.bytes(st.Recv))
	}
	ps := r.parts(st.Recv, r.recvPs)
	r.recvPs = ps
	if len(ps) == 1 {
		return r.recv(ctx, i, ps[0])
	}
	r.c.waiting(st.RecvFrom)
	c, tag := r.c.t.Conn(st.RecvFrom), Tag{Seq: r.seq, Step: r.p.recvTag[i]}
	var err error
	if v, ok := c.(Vectored); ok {
		err = v.RecvVec(ctx, tag, ps)
	} else {
		r.recvTmp = grow(r.recvTmp, piecesLen(ps))
		if err = c.Recv(ctx, tag, r.recvTmp); err == nil {
			scatter(ps, r.recvTmp)
		}
	}
	if err != nil {
		return r.opError(i, st.RecvFrom, err)
	}
	return nil
}

// runInline executes the plan step by step in the calling goroutine. It is
// used for small operations, where every send fits in the transport's
// buffering so that sending before receiving cannot deadlock, and where a
// goroutine hand-off would cost more than the data movement.
func (r *run) runInline(ctx context.Context, scratch []byte) error {
	for i := range r.p.steps {
		if err := r.runInlineStep(ctx, i, scratch); err != nil {
			return err
		}
	}
	return nil
}

// runInlineStep sends step i's segment, then receives its incoming one.
func (r *run) runInlineStep(ctx context.Context, i int, scratch []byte) error {
	st := r.p.steps[i]
	if st.SendTo >= 0 {
		if err := r.send(ctx, i, false); err != nil {
			return err
		}
	}
	switch {
	case st.RecvFrom < 0:
		return nil
	case st.Combine == Copy:
		return r.recvCopy(ctx, i)
	}
	if rr := r.onArrival(i); rr != nil {
		return r.recvReduce(ctx, i, rr)
	}
	tmp := scratch[:st.Recv.Len*r.esz]
	if err := r.recv(ctx, i, tmp); err != nil {
		return err
	}
	r.reduceInto(st.Recv, tmp)
	return nil
}

// reducePiece is how many received bytes runExchange lets gather before it
// folds them into the buffer: the front of a message is reduced while its
// tail is still arriving, from data the socket read has just brought
// into the cache.
const reducePiece = 64 << 10

// exchanges reports whether the plan can run step by step with each
// step's send and receive moving together through Exchange: it is a
// lockstep plan, no step of it copies what it receives into what it sends,
// and every link pair of its steps can. (A step that reduces into what it
// sends, as recursive doubling does, folds only once its send is out.)
func (r *run) exchanges() bool {
	if !r.p.lockstep {
		return false
	}
	for _, st := range r.p.steps {
		if st.SendTo < 0 || st.RecvFrom < 0 {
			continue
		}
		if st.Combine == Copy && st.Send.overlaps(st.Recv) {
			return false // a receive straight into what is still being sent
		}
		ex, ok := r.c.t.Conn(st.SendTo).(Exchanger)
		if !ok || !ex.CanExchange(r.c.t.Conn(st.RecvFrom)) {
			return false
		}
	}
	return true
}

// runExchange executes a lockstep plan step by step in the calling
// goroutine, each step's send and receive moving at once (see
// Exchanger), and reduces what arrives while the rest of it is still
// coming. A step that only sends or only receives does so alone: its
// peer's step matches it (see plan.lockstep). scratch holds the largest
// Reduce segment.
func (r *run) runExchange(ctx context.Context, scratch []byte) error {
	if r.fold == nil {
		r.fold = r.foldArrived // bound once: a run is reused (see call.run)
	}
	for i, st := range r.p.steps {
		if st.SendTo < 0 || st.RecvFrom < 0 {
			if err := r.runInlineStep(ctx, i, scratch); err != nil {
				return err
			}
			continue
		}
		ex := r.c.t.Conn(st.SendTo).(Exchanger)
		tag, rtag := Tag{Seq: r.seq, Step: r.p.sendTag[i]}, Tag{Seq: r.seq, Step: r.p.recvTag[i]}
		r.sendPs = r.segPieces(st.Send, r.sendPs)
		var arrived func(int)
		if st.Combine == Reduce {
			r.ex = exchangeFold{seg: st.Recv, tmp: scratch[:st.Recv.Len*r.esz]}
			r.recvPs = append(r.recvPs[:0], r.ex.tmp)
			if !st.Send.overlaps(st.Recv) { // else folded once all of the send is out (recursive doubling)
				arrived = r.fold
			}
		} else {
			r.recvPs = r.segPieces(st.Recv, r.recvPs)
		}
		r.c.waiting(st.RecvFrom)
		sendErr, recvErr := ex.Exchange(ctx, tag, r.sendPs, r.c.t.Conn(st.RecvFrom), rtag, r.recvPs, arrived)
		if x := &r.ex; recvErr == nil && st.Combine == Reduce && x.done < len(x.tmp) {
			r.reduceRange(x.seg, x.done, len(x.tmp), x.tmp) // only for an Exchange that does not report every arrival
		}
		if sendErr != nil || recvErr != nil {
			var se, re error
			if sendErr != nil {
				se = r.opError(i, st.SendTo, sendErr)
			}
			if recvErr != nil {
				re = r.opError(i, st.RecvFrom, recvErr)
			}
			return firstCause(se, re)
		}
	}
	return nil
}

// exchangeFold is the reduction in progress of runExchange's step: the
// segment reduced into, the scratch it arrives in, and how many bytes of
// it are folded in.
type exchangeFold struct {
	seg  Segment
	tmp  []byte
	done int
}

// foldArrived is runExchange's report of arrival (as r.fold): with the
// first n bytes of the step's message in, it folds what has arrived since
// the last fold, once that is at least reducePiece or the whole message.
func (r *run) foldArrived(n int) {
	x := &r.ex
	n -= n % r.esz
	if n-x.done >= reducePiece || n == len(x.tmp) && n > x.done {
		r.reduceRange(x.seg, x.done, n, x.tmp)
		x.done = n
	}
}

// segPieces returns s as pieces, reusing ps's storage: its parts in the
// vectored buffer, or its one slice of a plain buffer.
func (r *run) segPieces(s Segment, ps [][]byte) [][]byte {
	if r.inParts(s) {
		return r.parts(s, ps)
	}
	return append(ps[:0], r.bytes(s))
}

// reduceRange folds tmp[from:to], bytes from..to of segment s as
// received, into those bytes of s.
func (r *run) reduceRange(s Segment, from, to int, tmp []byte) {
	if !r.inParts(s) {
		r.reduce(r.bytes(s)[from:to], tmp[from:to])
		return
	}
	off := s.Off * r.esz
	r.redPs = r.vec.pieces(off+from, off+to, r.redPs[:0])
	for _, p := range r.redPs {
		r.reduce(p, tmp[from:from+len(p)])
		from += len(p)
	}
}

type received struct{ step, slot int }

// runPipelined executes the plan with three goroutines: the caller sends,
// a receiver reads segments into scratch slots (or straight into the buffer
// for Copy), and a reducer folds them in. Each waits only for the steps its
// data depends on, so consecutive segments overlap.
func (r *run) runPipelined(ctx context.Context, scratch [][]byte) error {
	r.sent.init()
	r.recvd.init()
	r.stop = make(chan struct{})
	free := make(chan int, len(scratch))
	for i := range scratch {
		free <- i
	}
	work := make(chan received, len(scratch))
	var wg sync.WaitGroup
	var recvErr error
	wg.Add(2)
	go func() { defer wg.Done(); recvErr = r.receiver(ctx, scratch, free, work) }()
	go func() { defer wg.Done(); r.reducer(scratch, free, work) }()
	sendErr := r.sender(ctx)
	if sendErr != nil {
		r.abort(sendErr)
	}
	wg.Wait()
	return firstCause(sendErr, recvErr)
}

// firstCause returns the first of errs that is not nil and does not merely
// say the transport was closed here, or else the first that is not nil.
func firstCause(errs ...error) error {
	var closed error
	for _, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, ErrClosed):
			return err
		case closed == nil:
			closed = err
		}
	}
	return closed
}

func (r *run) sender(ctx context.Context) error {
	for i, st := range r.p.steps {
		if st.SendTo < 0 {
			continue
		}
		if !r.recvd.wait(r.p.sendAfter[i]) {
			return nil // aborted: the cause is reported by whoever failed
		}
		if err := r.send(ctx, i, true); err != nil {
			return err
		}
		r.sent.complete(i)
	}
	return nil
}

func (r *run) receiver(ctx context.Context, scratch [][]byte, free chan int, work chan<- received) error {
	defer close(work)
	for i, st := range r.p.steps {
		if st.RecvFrom < 0 {
			continue
		}
		var rr ReduceReceiver
		if st.Combine == Reduce && r.p.recvAfter[i] < i {
			rr = r.onArrival(i)
		}
		// A receive into scratch waits for nothing: only its fold
		// must wait for the sends of what it folds into (see reducer).
		// One into the buffer waits for them here, and never for its
		// own step's send (recursive doubling), which cannot finish
		// before the peer reads while the peer's cannot before this
		// rank does, once a message outgrows what the link buffers.
		if (st.Combine != Reduce || rr != nil) && !r.sent.wait(r.p.recvAfter[i]) {
			return nil
		}
		slot := -1
		var err error
		switch {
		case rr != nil:
			// Straight into the buffer, once every earlier receive into
			// the segment has been folded in.
			if !r.recvd.wait(r.p.reduceAfter[i]) {
				return nil
			}
			err = r.recvReduce(ctx, i, rr)
		case st.Combine == Reduce:
			select {
			case slot = <-free:
			case <-r.stop:
				return nil
			}
			err = r.recv(ctx, i, scratch[slot][:st.Recv.Len*r.esz])
		default:
			err = r.recvCopy(ctx, i)
		}
		if err != nil {
			r.abort(err)
			return err
		}
		work <- received{i, slot}
	}
	return nil
}

// reducer folds what the receiver left in scratch slots into the buffer,
// in step order, each once the sends of what it folds into are out (a
// recursive-doubling step's own send included), and frees the slots.
func (r *run) reducer(scratch [][]byte, free chan<- int, work <-chan received) {
	for w := range work {
		if w.slot >= 0 {
			if !r.sent.wait(r.p.recvAfter[w.step]) {
				free <- w.slot // aborted: drain until the receiver stops
				continue
			}
			s := r.p.steps[w.step].Recv
			r.reduceInto(s, scratch[w.slot][:s.Len*r.esz])
			free <- w.slot
		}
		r.recvd.complete(w.step)
	}
}
