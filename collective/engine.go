package collective

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCycleTime is the time between negotiation cycles when
// EngineConfig.CycleTime is zero.
const DefaultCycleTime = time.Millisecond

// shutdownGrace bounds how long Shutdown lets a negotiation in progress
// finish (so that the peers learn of the shutdown) before cancelling it.
const shutdownGrace = 2 * time.Second

// EngineConfig tunes an Engine. Its zero value disables fusion, the
// response cache, the stall inspector and the timeline; DefaultEngineConfig
// gives the defaults hvd and gorun use. Negative sizes and times act as 0.
type EngineConfig struct {
	// FusionThreshold is the most bytes of all-reduces packed into one
	// fused batch; 0 disables fusion.
	FusionThreshold int64
	// CycleTime is the time between negotiation cycles: longer cycles fuse
	// more tensors, shorter ones answer sooner. 0 means DefaultCycleTime.
	CycleTime time.Duration
	// CacheCapacity is the number of response cache entries; 0 disables
	// the cache, so every request is sent in every negotiation.
	CacheCapacity int
	// StallWarning: tensors submitted by some ranks but not others for
	// this long are logged (by rank 0) with the ranks that are missing
	// them, and a negotiation that has waited this long for ranks that do
	// not negotiate at all (they have submitted nothing) is logged, by each
	// waiting rank, with the ranks it waits for; 0 disables.
	// StallShutdown: after this long every rank fails its pending
	// operations with ErrStall, naming the missing ranks; 0 means never.
	// For ranks that do not negotiate it acts as OpTimeout does (below,
	// in real time), when it is shorter or OpTimeout is 0, with ErrStall.
	StallWarning, StallShutdown time.Duration
	// OpTimeout bounds every wait of an operation for another rank: each
	// data-plane operation once every rank has submitted it, and each step
	// of the negotiation that decides it. A rank that does not answer the
	// negotiation within OpTimeout (it is stopped or hung, or, since an
	// engine negotiates only while some rank has work, it has submitted
	// nothing for that long while another rank waits with operations) is
	// named in a *NoAnswerError that wraps ErrTimeout; the verdict travels
	// with the negotiation, so every rank still negotiating fails with it.
	// Each of the negotiation's log2(size)+2 or fewer steps allows one
	// OpTimeout more than the step before it (a peer may itself have waited
	// that long), so the ranks fail between OpTimeout and that many times
	// OpTimeout after they began to wait. A rank that waits inside a
	// data-plane operation (or the gather of new requests) names the peer
	// it waited for in an *OpError that wraps ErrTimeout; the other ranks
	// then see that rank leave (ErrPeerGone). Waiting for other ranks to
	// submit a tensor while they keep negotiating is a stall, not a
	// timeout. Measured in real time, not by Now. 0 means no bound.
	OpTimeout time.Duration
	// Timeline, when set on rank 0, receives a Chrome trace (JSON) of every
	// tensor's negotiation and execution; the Engine does not close it.
	// Other ranks ignore it.
	Timeline io.Writer
	// Logger receives the engine's logs; it should carry the rank. nil
	// means slog.Default() with the rank attached.
	Logger *slog.Logger
	// Now is the clock used for measurements (stall times, the timeline,
	// statistics); nil means time.Now. Cycles are paced by real time.
	Now func() time.Time
}

// DefaultEngineConfig returns the configuration hvd uses by default:
// 64 MiB fusion, 1 ms cycles, 1024 cache entries, a stall warning after
// 60 s and no stall shutdown.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{
		FusionThreshold: DefaultFusionThreshold,
		CycleTime:       DefaultCycleTime,
		CacheCapacity:   1024,
		StallWarning:    DefaultStallWarning,
	}
}

// EngineStats counts an Engine's work since it started.
type EngineStats struct {
	Cycles      uint64        // negotiation cycles run
	Gathers     uint64        // cycles in which uncached requests were gathered
	Negotiation time.Duration // time spent in the negotiation collectives
	Cached      uint64        // responses that came from the cache
	Negotiated  uint64        // responses negotiated in full
	Batches     uint64        // all-reduce batches, one Comm.Allreduce each
	Tensors     uint64        // all-reduced tensors in those batches
}

// Engine runs named collective operations that ranks submit in any order;
// see the package documentation. One goroutine ("collective-engine") owns
// the negotiation and all use of the Comm while the engine is active; the
// methods may be called from any goroutine.
type Engine struct {
	c          *Comm
	cfg        EngineConfig
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
	stats    EngineStats

	wake      chan struct{} // a submission or Join arrived
	stop      chan struct{} // closed by Shutdown
	done      chan struct{} // closed when the loop goroutine has left
	watchDone chan struct{} // closed when the watchdog has left
	cancel    context.CancelFunc
	waiting   atomic.Pointer[exchangeWait] // the negotiation exchange in progress, for the watchdog

	loopState // owned by the loop goroutine
}

// NewEngine starts an engine over c. The Engine uses c for negotiation
// and data: while it is active, nothing else may use c (see Quiesce).
func NewEngine(c *Comm, cfg EngineConfig) *Engine {
	if cfg.CycleTime <= 0 {
		cfg.CycleTime = DefaultCycleTime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default().With("rank", c.Rank())
	}
	e := &Engine{c: c, cfg: cfg, log: log, now: cfg.Now, rank: c.Rank(), size: c.Size(),
		inflight: map[string]bool{}, idle: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), watchDone: make(chan struct{})}
	close(e.idle)
	e.initLoop()
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
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
	h := newHandle(req.Name)
	if err := checkBuffer(&req, data); err != nil {
		h.finish(nil, nil, err)
		return h
	}
	req.Shape, req.Splits = cloneInts(req.Shape), cloneInts(req.Splits)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refuse(&req); err != nil {
		h.finish(nil, nil, err)
		return h
	}
	e.inflight[req.Name] = true
	e.seq++
	e.queue = append(e.queue, &entry{req: req, data: data, h: h, submitted: e.now(), seq: e.seq, slot: -1})
	e.signal()
	return h
}

// refuse returns why req cannot be submitted now, or nil; e.mu is held.
func (e *Engine) refuse(req *Request) error {
	switch {
	case e.cause != nil:
		return e.cause
	case e.closing:
		return fmt.Errorf("collective: %v %q: %w", req.Kind, req.Name, ErrShutdown)
	case e.joinWait != nil:
		return fmt.Errorf("collective: %v %q submitted after this rank joined: %w", req.Kind, req.Name, ErrJoined)
	case e.inflight[req.Name]:
		return fmt.Errorf("collective: %v %q: %w", req.Kind, req.Name, ErrDuplicateName)
	}
	return nil
}

// checkBuffer checks what only this rank can: that the request fits the
// wire and data fits a well-formed request. Other problems are left to the
// negotiation, which reports them on every rank.
func checkBuffer(req *Request, data []byte) error {
	if len(req.Name) > maxNameLen || len(req.Shape) > maxDims {
		return fmt.Errorf("collective: %v %.40q...: %w: names are limited to %d bytes and shapes to %d dimensions",
			req.Kind, req.Name, ErrInvalid, maxNameLen, maxDims)
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
		return fmt.Errorf("collective: %v %q: %w: shape %v of %v needs %d bytes, buffer has %d",
			req.Kind, req.Name, ErrInvalid, req.Shape, req.DType, want, len(data))
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
func (e *Engine) Stats() EngineStats {
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
		return fmt.Errorf("collective: waiting for the engine to go idle: %w", ctx.Err())
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
