package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/settings"
)

// shutdownGrace bounds how long Shutdown lets a negotiation in progress
// finish (so that the peers learn of the shutdown) before cancelling it.
const shutdownGrace = 2 * time.Second

// Config tunes an Engine: the knobs of settings.Engine, and what the
// Engine writes to and measures with. Its zero value disables fusion, the
// response cache, the stall inspector, the operation timeout and the
// timeline; DefaultConfig gives the defaults hvd and gorun use. Negative
// sizes and times act as 0. Now is not used for OpTimeout's bound on
// the collectives and the exchange, which is measured in real time; the
// stall inspector measures how long names wait (which OpTimeout bounds
// too) with Now.
type Config struct {
	settings.Engine
	// Timeline, when set on rank 0, receives a Chrome trace (JSON) of every
	// tensor's negotiation and execution; the Engine does not close it.
	// Other ranks ignore it.
	Timeline io.Writer
	// AutotuneLog, when set on rank 0 with Autotune, receives a CSV of the
	// autotuner's trials (see the package documentation); the Engine does
	// not close it. Other ranks ignore it.
	AutotuneLog io.Writer
	// Logger receives the engine's logs; it should carry the rank. nil
	// means slog.Default() with the rank attached.
	Logger *slog.Logger
	// OnStall, when set, is called with each stall warning the Engine
	// logs (whatever the log level): rank 0's stalled tensors and its
	// stall shutdown, and any rank's negotiation waiting for silent
	// ranks. It is called from the Engine's goroutines and must not
	// block.
	OnStall func(Stall)
	// Now is the clock used for measurements (stall times, the timeline,
	// statistics, autotuning); nil means time.Now. Cycles are paced by
	// real time.
	Now func() time.Time

	// tunePlan, when set (by tests), adjusts the autotuner's plan.
	tunePlan func(*tunePlan)
	// noEarly, set by tests, turns the early all-reduce off.
	noEarly bool
}

// DefaultConfig returns the configuration hvd uses by default: the knobs
// of settings.DefaultEngine, no timeline, slog.Default() and time.Now.
func DefaultConfig() Config {
	return Config{Engine: settings.DefaultEngine()}
}

// Stats counts an Engine's work since it started.
type Stats struct {
	Cycles      uint64        // negotiation cycles run
	Gathers     uint64        // cycles in which uncached requests were gathered
	Negotiation time.Duration // time spent in the negotiation collectives
	Cached      uint64        // responses that came from the cache
	Negotiated  uint64        // responses negotiated in full
	Batches     uint64        // all-reduce batches, one collective.Comm.Allreduce each
	Tensors     uint64        // all-reduced tensors in those batches
	Driven      uint64        // cycles run by a caller waiting for its operation (Handle.Drive)
	Wakes       uint64        // times the engine's goroutine woke from waiting for work or for the next cycle
	Early       uint64        // all-reduces completed by the negotiation exchange itself (counted in Batches too)
	// Kinds counts the operations this rank ran, by Kind (index
	// KindAllreduce and so on; 0 is unused). Early all-reduces count
	// their tensor and bytes; their time is in Negotiation.
	Kinds [KindBarrier + 1]KindStats
}

// KindStats counts the operations of one kind.
type KindStats struct {
	Tensors uint64        // tensors
	Bytes   uint64        // their bytes on this rank (what it submitted, or the zeros of a joined rank)
	Time    time.Duration // time running their batches, each from the end of the cycle's decision or of the batch before
}

// Engine runs named collective operations that ranks submit in any order;
// see the package documentation. The negotiation and all use of the Comm
// belong, while the engine is active, to one goroutine at a time: the
// engine's own ("collective-engine") or a caller waiting in Handle.Wait
// or Drive (see the loop). The methods may be called from any goroutine.
type Engine struct {
	c          *collective.Comm
	cfg        Config
	log        *slog.Logger
	now        func() time.Time
	rank, size int

	mu       sync.Mutex // guards the fields below, up to loop state
	queue    []*entry   // submitted, not yet taken by the loop
	seq      uint64     // submission counter
	inflight map[string]bool
	joinReq  *joinWaiter // a Join not yet taken by the loop
	joinWait *joinWaiter // the Join in effect, until every rank joined
	closing  bool        // Shutdown was called
	cause    error       // why the engine stopped
	idle     chan struct{}
	stats    Stats

	wake      chan struct{}   // a submission or Join arrived
	turn      chan struct{}   // holds the token that lets a goroutine run cycles (see loop)
	ctx       context.Context // the cycles' context, cancelled when Shutdown's grace ends
	stop      chan struct{}   // closed by Shutdown
	done      chan struct{}   // closed when the loop goroutine has left
	watchDone chan struct{}   // closed when the watchdog has left
	cancel    context.CancelFunc
	waiting   exchangeWait // the negotiation exchange in progress, for the watchdog

	loopState // owned by the holder of the turn
}

// New starts an engine over c. The Engine uses c for negotiation
// and data: while it is active, nothing else may use c (see Quiesce).
func New(c *collective.Comm, cfg Config) *Engine {
	if cfg.CycleTime <= 0 {
		cfg.CycleTime = settings.DefaultCycleTime
	}
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default().With("rank", c.Rank())
	}
	e := &Engine{c: c, cfg: cfg, log: log, now: cfg.Now, rank: c.Rank(), size: c.Size(),
		inflight: map[string]bool{}, idle: make(chan struct{}),
		wake: make(chan struct{}, 1), turn: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), watchDone: make(chan struct{})}
	close(e.idle)
	e.realClock = realClock
	e.initLoop()
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx, e.cancel = ctx, cancel
	e.deadline = opDeadline{limit: cfg.OpTimeout}
	e.turn <- struct{}{}
	go e.run(ctx) // "collective-engine"
	go e.watch()  // "collective-engine-watchdog"
	return e
}

// Submit starts the operation req describes on data, the in/out buffer:
// all-reduce and broadcast work in place; all-gather, all-to-all and
// reduce-scatter leave data unchanged and return a new buffer as the
// handle's Output. data must hold exactly the elements Shape and DType
// describe and must not be touched until the handle is done. A name may
// have one operation in flight; other errors (a name submitted twice,
// after Shutdown or a failure, or while joined) fail the handle at once.
func (e *Engine) Submit(req Request, data []byte) *Handle {
	return e.submit(req, data, true)
}

// SubmitDriven is Submit for a caller that waits for the operation at once,
// with Handle.Wait without a deadline or Handle.Drive: it leaves the
// engine's goroutine asleep, since the caller will run the cycles itself
// (or wake it, if another goroutine runs them). A handle submitted this way
// and not driven waits until something else starts a cycle.
func (e *Engine) SubmitDriven(req Request, data []byte) *Handle {
	return e.submit(req, data, false)
}

func (e *Engine) submit(req Request, data []byte, wake bool) *Handle {
	h := newHandle(req.Name)
	if err := checkBuffer(&req, data); err != nil {
		h.finish(nil, nil, err)
		return h
	}
	if req.Shape != nil && len(req.Shape) <= len(h.dims) {
		req.Shape = append(h.dims[:0:len(req.Shape)], req.Shape...)
	} else {
		req.Shape = cloneInts(req.Shape)
	}
	req.Splits = cloneInts(req.Splits)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refuse(&req); err != nil {
		h.finish(nil, nil, err)
		return h
	}
	e.inflight[req.Name] = true
	e.seq++
	h.e = e
	h.en = entry{req: req, data: data, h: h, seq: e.seq, slot: -1}
	if e.cfg.Timeline != nil && e.rank == 0 { // rank 0's timeline starts the negotiation here
		h.en.submitted = e.now()
	}
	e.queue = append(e.queue, &h.en)
	if wake {
		e.signal()
	}
	return h
}

// refuse returns why req cannot be submitted now, or nil; e.mu is held.
func (e *Engine) refuse(req *Request) error {
	switch {
	case e.cause != nil:
		return e.cause
	case e.closing:
		return fmt.Errorf("engine: %v %q: %w", req.Kind, req.Name, ErrShutdown)
	case e.joinWait != nil:
		return fmt.Errorf("engine: %v %q submitted after this rank joined: %w", req.Kind, req.Name, ErrJoined)
	case e.inflight[req.Name]:
		return fmt.Errorf("engine: %v %q: %w", req.Kind, req.Name, ErrDuplicateName)
	}
	return nil
}

// checkBuffer checks what only this rank can: that the request fits the
// wire and data fits a well-formed request. Other problems are left to the
// negotiation, which reports them on every rank.
func checkBuffer(req *Request, data []byte) error {
	if len(req.Name) > maxNameLen || len(req.Shape) > maxDims {
		return fmt.Errorf("engine: %v %.40q...: %w: names are limited to %d bytes and shapes to %d dimensions",
			req.Kind, req.Name, collective.ErrInvalid, maxNameLen, maxDims)
	}
	if req.Kind == KindBarrier || !req.DType.Valid() {
		return nil
	}
	for _, d := range req.Shape {
		if d < 0 {
			return nil
		}
	}
	if want := req.Bytes(); len(data) != want {
		return fmt.Errorf("engine: %v %q: %w: shape %v of %v needs %d bytes, buffer has %d",
			req.Kind, req.Name, collective.ErrInvalid, req.Shape, req.DType, want, len(data))
	}
	return nil
}

func cloneInts(xs []int) []int {
	if xs == nil {
		return nil
	}
	return append([]int{}, xs...)
}

// signal wakes the loop if it waits for work.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Err returns why the engine stopped (a failure, a peer's shutdown, a
// stall, Shutdown), or nil while it runs.
func (e *Engine) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cause
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Quiesce returns once the engine is idle: no rank has an operation in
// flight or is joined, and the engine has stopped negotiating, so the Comm
// may be used directly (the same calls in the same order on every rank)
// until the next Submit or Join. It also returns once the engine stopped.
func (e *Engine) Quiesce(ctx context.Context) error {
	e.mu.Lock()
	idle := e.idle
	e.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: waiting for the engine to go idle: %w", ctx.Err())
	}
}

// setActive records whether the loop is negotiating; e.mu is held.
func (e *Engine) setActive(active bool) {
	select {
	case <-e.idle:
		if active {
			e.idle = make(chan struct{})
		}
	default:
		if !active {
			close(e.idle)
		}
	}
}

// Shutdown stops the engine and returns when its goroutines are gone.
// Operations still in flight here fail with ErrShutdown. When the engine
// is negotiating, it tells the other ranks, whose engines then stop too
// and fail their operations naming this rank; a negotiation that cannot
// finish within a grace period is cancelled, which fails the Comm. It does
// not close the Comm. Shutdown is idempotent.
func (e *Engine) Shutdown() {
	e.mu.Lock()
	first := !e.closing
	e.closing = true
	e.mu.Unlock()
	if first {
		close(e.stop)
	}
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	select {
	case <-e.done:
	case <-grace.C:
		e.cancel()
		<-e.done
	}
	e.cancel()
	<-e.watchDone
}
