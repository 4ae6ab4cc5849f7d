package hvd

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/rendezvous"
)

// Bounds of the scalars a runtime publishes (LogScalars).
const (
	// ScalarBuffer is how many points wait for the next send at most;
	// more are dropped and counted. It holds what 10,000 calls a second of
	// 4 scalars log in a ScalarInterval, and the runtime series.
	ScalarBuffer = rendezvous.MaxMetricPoints
	// ScalarInterval is how often the buffered points go to gorun (sooner
	// when the buffer is three quarters full).
	ScalarInterval = 250 * time.Millisecond
	// scalarSendTimeout bounds one send, and so what Shutdown adds for
	// the last one.
	scalarSendTimeout = time.Second
)

// LogScalars publishes scalars of training step step (loss, accuracy,
// learning rate, samples per second) on the default runtime; see
// Runtime.LogScalars. Before Init it does nothing.
func LogScalars(step int64, scalars map[string]float64) {
	if rt := Default(); rt != nil {
		rt.LogScalars(step, scalars)
	}
}

// LogScalars publishes scalars of training step step to gorun, which
// keeps them, with this rank's runtime series, for --metrics-dir (and its
// dashboard). It never blocks and is cheap enough for every step (see
// BenchmarkLogScalars and BenchmarkLogScalarsInSteps): the values are
// packed into a buffer of ScalarBuffer points that a goroutine sends
// every ScalarInterval, or as soon as the buffer is three quarters full,
// and once more in Shutdown (which then waits at most about a second).
// A scalar whose name the rendezvous refuses (empty, or longer than
// rendezvous.MaxKeyLen) is dropped and counted. Points
// that find the buffer full, whose send fails, or that nobody takes
// (gorun without --metrics-dir; a job that gorun did not start, whose
// rank 0 serves the rendezvous) are dropped and counted (DroppedScalars,
// and the series hvd/dropped_points).
//
// From the first call on, every send also carries the runtime's own
// series, cumulative since the runtime started unless said otherwise, at
// the step of the latest call:
//
//	hvd/step                         the step of the latest LogScalars
//	hvd/step_seconds                 wall time per step since the last send
//	hvd/comm_share                   the share of the time since the last send
//	                                 that the engine spent running collectives
//	                                 and negotiating, in [0, 1]: an upper bound
//	                                 on the time training waited for them
//	                                 (overlapped time counts too)
//	hvd/KIND_bytes, _tensors, _seconds  per kind of collective (allreduce,
//	                                 allgather, broadcast, alltoall,
//	                                 reducescatter), this rank's bytes
//	hvd/allreduce_busbw              all-reduce bus bandwidth since the last
//	                                 send, bytes per second (bytes/time ×
//	                                 2(size-1)/size)
//	hvd/cycles, hvd/negotiation_seconds  negotiation cycles and their time
//	hvd/cache_hit_rate               responses from the response cache ÷ all
//	hvd/fused_tensors_per_batch      all-reduced tensors ÷ all-reduce batches
//	hvd/link_sent_bytes/P            bytes sent to rank P (shared memory or TCP)
//	hvd/link_recv_bytes/P            bytes received from rank P
//	hvd/dropped_points               points this rank dropped
//
// Link bytes are counted only under gorun. Names of scalars should not
// start with "hvd/". The engine's stall warnings go the same way, as
// events of kind StallEvent, whether or not LogScalars is called.
func (r *Runtime) LogScalars(step int64, scalars map[string]float64) {
	r.pub.log(step, scalars)
}

// DroppedScalars counts the points of LogScalars (and runtime series)
// that this runtime dropped.
func (r *Runtime) DroppedScalars() int64 {
	if r.pub == nil {
		return 0
	}
	return r.pub.dropped.Load()
}

// publisher buffers a runtime's points and sends them to gorun.
type publisher struct {
	r       *Runtime
	rdv     *rendezvous.Client // nil: every point is dropped
	rank    int
	epoch   time.Time // the clock of the points (see now)
	dropped atomic.Int64
	deaf    atomic.Bool // the server takes no metrics, or there is none

	mu      sync.Mutex
	buf     *rendezvous.Batch        // the points, packed as they come
	spare   *rendezvous.Batch        // the one the last send used
	rts     []rendezvous.MetricPoint // the runtime series of the last send
	step    int64                    // the latest step logged
	stepAt  time.Time                // when it was first logged
	logged  bool                     // LogScalars was called
	sentFor int64                    // the step of the last runtime series sent
	prev    sample                   // the counters at the last runtime series sent

	kick    chan struct{} // a send is due early: the buffer is three quarters full
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// sample is what the runtime series are computed from.
type sample struct {
	at     time.Time // when the step was first logged
	step   int64
	engine engine.Stats
	read   time.Time // when engine was read
}

// newPublisher makes r's publisher; it sends only where r has gorun's
// rendezvous client, from a goroutine that start runs.
func newPublisher(r *Runtime) *publisher {
	p := &publisher{r: r, rdv: r.rdv, rank: r.env.Rank, epoch: time.Now()}
	if p.rdv == nil {
		p.deaf.Store(true)
		return p
	}
	p.buf, p.spare, p.kick = new(rendezvous.Batch), new(rendezvous.Batch), make(chan struct{}, 1)
	return p
}

// attach makes a publisher without a client (a runtime of an elastic
// generation, whose transport RunElastic built) send through c, the
// worker's rendezvous client, under rank, and starts it. It does nothing
// to a publisher that sends already. c stays its owner's: close does not
// close it.
func (p *publisher) attach(c *rendezvous.Client, rank int) {
	if p == nil || c == nil || p.rdv != nil || p.stop != nil {
		return
	}
	p.rdv, p.rank = c, rank
	p.mu.Lock()
	p.buf, p.spare, p.kick = new(rendezvous.Batch), new(rendezvous.Batch), make(chan struct{}, 1)
	p.mu.Unlock()
	p.deaf.Store(false)
	p.start()
}

// start runs the sending goroutine ("hvd-scalars").
func (p *publisher) start() {
	if p.deaf.Load() {
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.run()
}

// log copies the scalars of step into the buffer.
func (p *publisher) log(step int64, scalars map[string]float64) {
	if p == nil {
		return
	}
	if p.deaf.Load() {
		p.dropped.Add(int64(len(scalars)))
		return
	}
	now := p.now()
	t := now.UnixNano()
	p.mu.Lock()
	if !p.logged || step != p.step {
		p.step, p.stepAt, p.logged = step, now, true
	}
	n := 0
	for name, v := range scalars { // a full buffer (ScalarBuffer) takes no more
		if p.buf.Add(rendezvous.MetricPoint{Step: step, Time: t, Name: name, Value: v}) {
			n++
		}
	}
	early := p.buf.Len() >= ScalarBuffer*3/4
	p.mu.Unlock()
	if n < len(scalars) {
		p.dropped.Add(int64(len(scalars) - n))
	}
	if early && p.kick != nil {
		select { // the sender sends now rather than at its next tick
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// now is the time of a point: the wall time at the publisher's start
// plus the monotonic time since. That is one reading of the clock where
// time.Now takes two (about 20 ns each on a virtual machine), and points
// keep their order when the wall clock is set back.
func (p *publisher) now() time.Time {
	return p.epoch.Add(time.Since(p.epoch))
}

// run sends every ScalarInterval until stop.
func (p *publisher) run() {
	defer close(p.done)
	t := time.NewTicker(ScalarInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.flush()
		case <-p.kick:
			p.flush()
		case <-p.stop:
			p.flush()
			return
		}
	}
}

// close sends what is left (bounded by scalarSendTimeout) and stops the
// goroutine; without send, it drops what is left.
func (p *publisher) close(send bool) {
	if p == nil || p.stop == nil {
		return
	}
	if !send {
		p.deaf.Store(true)
	}
	p.stopped.Do(func() { close(p.stop) })
	<-p.done
}

// flush sends the buffered points and, when the step moved on, the
// runtime series, in one call where they fit.
func (p *publisher) flush() {
	p.mu.Lock()
	batch := p.buf
	p.buf, p.spare = p.spare, nil
	p.buf.Reset()
	cur := sample{at: p.stepAt, step: p.step}
	due := p.logged && (cur.step != p.sentFor || p.prev.at.IsZero())
	p.mu.Unlock()
	var rts []rendezvous.MetricPoint
	if due {
		cur.engine, cur.read = p.r.engine.Stats(), time.Now()
		rts = p.runtimeSeries(p.rts[:0], cur)
	}
	if batch.Len()+len(rts) <= rendezvous.MaxMetricPoints {
		for _, pt := range rts {
			batch.Add(pt)
		}
		rts = rts[:0]
	}
	if !p.send(batch.Len(), func(ctx context.Context) error { return p.rdv.PushBatch(ctx, p.rank, batch) }) {
		batch = new(rendezvous.Batch) // gorpc may still hold its bytes
	}
	p.send(len(rts), func(ctx context.Context) error { return p.rdv.PushMetrics(ctx, p.rank, rts) })
	p.mu.Lock()
	p.spare, p.rts = batch, rts[:0]
	p.mu.Unlock()
}

// send makes one push of n points, bounded by scalarSendTimeout, counts
// them as dropped if it fails, and reports whether push was not left
// holding anything: true too when there is nothing to send, or nobody
// listens (the points are dropped and counted without a push).
func (p *publisher) send(n int, push func(context.Context) error) bool {
	if n == 0 {
		return true
	}
	if p.deaf.Load() {
		p.dropped.Add(int64(n))
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), scalarSendTimeout)
	err := push(ctx)
	cancel()
	if err == nil {
		return true
	}
	p.dropped.Add(int64(n))
	if errors.Is(err, rendezvous.ErrNoMetrics) || errors.Is(err, rendezvous.ErrClosed) {
		p.deaf.Store(true) // nobody listens: drop at once from now on
	}
	p.r.log.Debug("hvd: metrics not sent", "points", n, "err", err)
	return false
}

// commShare is the share of span that the engine was busy: busy, the
// growth of its busy time between two readings of its statistics, over
// span, the time between those readings (not between the steps' first
// LogScalars, which a busy engine can outlast). A batch is counted when
// it ends, so one that began before the earlier reading counts whole in
// this span; the share is therefore clamped to [0, 1]. ok is false when
// span is not positive.
func commShare(busy, span time.Duration) (share float64, ok bool) {
	if span <= 0 {
		return 0, false
	}
	return min(max(float64(busy)/float64(span), 0), 1), true
}

// kindNames are the kinds of collective with runtime series.
var kindNames = []engine.Kind{engine.KindAllreduce, engine.KindAllgather, engine.KindBroadcast,
	engine.KindAlltoall, engine.KindReducescatter}

// runtimeSeries appends the runtime's points at cur's step (see
// LogScalars) and remembers cur for the next.
func (p *publisher) runtimeSeries(out []rendezvous.MetricPoint, cur sample) []rendezvous.MetricPoint {
	t := time.Now().UnixNano()
	add := func(name string, v float64) {
		out = append(out, rendezvous.MetricPoint{Step: cur.step, Time: t, Name: name, Value: v, Runtime: true})
	}
	st := cur.engine
	add("hvd/step", float64(cur.step))
	prev := p.prev
	busy := func(s engine.Stats) time.Duration {
		d := s.Negotiation
		for _, k := range kindNames {
			d += s.Kinds[k].Time
		}
		return d
	}
	if !prev.at.IsZero() && cur.step > prev.step {
		wall := cur.at.Sub(prev.at)
		add("hvd/step_seconds", wall.Seconds()/float64(cur.step-prev.step))
		if share, ok := commShare(busy(st)-busy(prev.engine), cur.read.Sub(prev.read)); ok {
			add("hvd/comm_share", share)
		}
		ar, par := st.Kinds[engine.KindAllreduce], prev.engine.Kinds[engine.KindAllreduce]
		if n := p.r.Size(); ar.Time > par.Time && n > 1 {
			algbw := float64(ar.Bytes-par.Bytes) / (ar.Time - par.Time).Seconds()
			add("hvd/allreduce_busbw", algbw*2*float64(n-1)/float64(n))
		}
	}
	for _, k := range kindNames {
		ks := st.Kinds[k]
		if ks.Tensors == 0 {
			continue
		}
		name := "hvd/" + k.String()
		add(name+"_bytes", float64(ks.Bytes))
		add(name+"_tensors", float64(ks.Tensors))
		add(name+"_seconds", ks.Time.Seconds())
	}
	add("hvd/cycles", float64(st.Cycles))
	add("hvd/negotiation_seconds", st.Negotiation.Seconds())
	if n := st.Cached + st.Negotiated; n > 0 {
		add("hvd/cache_hit_rate", float64(st.Cached)/float64(n))
	}
	if st.Batches > 0 {
		add("hvd/fused_tensors_per_batch", float64(st.Tensors)/float64(st.Batches))
	}
	if b := p.r.links; b != nil {
		for peer, c := range b.conns {
			if bc, ok := c.(*blameConn); ok {
				add("hvd/link_sent_bytes/"+strconv.Itoa(peer), float64(bc.sent.Load()))
				add("hvd/link_recv_bytes/"+strconv.Itoa(peer), float64(bc.recv.Load()))
			}
		}
	}
	add("hvd/dropped_points", float64(p.dropped.Load()))
	p.mu.Lock()
	p.prev, p.sentFor = cur, cur.step
	p.mu.Unlock()
	return out
}
