package ps

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// Errors of the coordinator and the worker pool. Returned errors wrap
// them with %w; test with errors.Is.
var (
	// ErrCoordinatorStopped: the coordinator was stopped (Stop), or never started.
	// RemoteValues pending at Stop and steps scheduled after it fail
	// with it.
	ErrCoordinatorStopped = errors.New("ps: coordinator stopped")
	// ErrUnknownStep: a step was scheduled under a name the worker that
	// took it has no step function for; the message names the step and
	// the worker's names.
	ErrUnknownStep = errors.New("ps: unknown step function")
	// ErrStepFailed: a step function returned an error (not a parameter
	// server's); the message carries the step's name, id, worker and the
	// error's text. Such a step is not run again.
	ErrStepFailed = errors.New("ps: step failed")
	// ErrTooLarge: a step's arguments or result exceed MaxStepBytes.
	ErrTooLarge = errors.New("ps: step arguments or result too large")
	// ErrCoordinatorFailed wraps the error given to Coordinator.Fail, and
	// so every RemoteValue and Join that fail because of it; a worker's
	// report that a parameter server failed is such an error.
	ErrCoordinatorFailed = errors.New("ps: coordinator failed")
	// ErrChiefUnreachable: RunWorker could not reach the chief for its
	// heartbeat timeout after having reached it.
	ErrChiefUnreachable = errors.New("ps: chief unreachable")
	// ErrWorkerReplaced: RunWorker's worker index was taken by a newer
	// incarnation (another RunWorker with the same index reached the
	// chief later); the old one exits with this error.
	ErrWorkerReplaced = errors.New("ps: worker replaced by a newer incarnation")
)

// serverFailure is how the coordinator recognises a parameter server's
// failure in a step function's error without depending on the servers'
// error type: any error in the chain with this method. The parameter
// servers' *ServerError has it. A step error that has it fails the whole
// job (Coordinator.Fail) instead of one RemoteValue: training cannot go on
// without the variables that server holds.
type serverFailure interface {
	PSServer() (index int, addr string)
}

// remoteServerError is a parameter server's failure as a worker reported
// it to the chief. It keeps the server's index and address (PSServer), so
// errors.As finds it in Join's and every RemoteValue's error.
type remoteServerError struct {
	index  int
	addr   string
	worker int
	step   string
	msg    string // the worker's error text, naming the server
}

func (e *remoteServerError) Error() string {
	return fmt.Sprintf("%s (reported by worker %d running step %q)", e.msg, e.worker, e.step)
}

// PSServer is the failed server's index and address.
func (e *remoteServerError) PSServer() (int, string) { return e.index, e.addr }

// CoordinatorConfig configures a Coordinator.
//
// Its String and GoString leave the secret out.
type CoordinatorConfig struct {
	// Listener, if not nil, is already listening where workers will dial
	// (Job.Listener); the coordinator closes it at Stop. Otherwise the
	// coordinator listens on Addr ("host:port"; port 0 picks one).
	Listener net.Listener
	Addr     string
	// Secret is the 32-byte job secret; workers authenticate with it.
	Secret []byte
	// TLS runs every connection inside TLS 1.3 keyed from Secret; the
	// workers must set WorkerConfig.TLS the same way.
	TLS bool
	// Logger receives the coordinator's logs; nil discards them.
	Logger *slog.Logger
	// HeartbeatTimeout is how long a worker may be silent before it is
	// dropped and its unfinished steps go back to the queue; workers
	// learn it and give up on a chief they cannot reach for as long.
	// Zero means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// OnWorkerLost, if set, is called with a worker's index when the
	// coordinator drops it (its connection broke, or it fell silent),
	// not when Stop tells it to go: Run drops it from the servers'
	// staleness bound there, so that the others do not wait for it. It
	// runs on its own goroutine; Stop waits for it.
	OnWorkerLost func(index int)
	// OnWorkerIdle, if set, is called with a worker's index when the
	// worker asks for a step and the queue has none, once until it is
	// handed a step again: Run drops it from the servers' staleness bound
	// there, since a worker with nothing to run cannot catch up, and one
	// ahead of it would otherwise wait for it until the servers' op
	// timeout. The worker counts again from its next Pull. It runs on its
	// own goroutine; Stop waits for it.
	OnWorkerIdle func(index int)
}

// String describes the config without its secret.
func (c CoordinatorConfig) String() string {
	addr := c.Addr
	if c.Listener != nil {
		addr = c.Listener.Addr().String()
	}
	return fmt.Sprintf("ps.CoordinatorConfig{Addr: %q, TLS: %t, HeartbeatTimeout: %s}", addr, c.TLS, c.HeartbeatTimeout)
}

// GoString is String, so %#v does not print the secret either.
func (c CoordinatorConfig) GoString() string { return c.String() }

// Coordinator is the chief's end of the worker pool, TensorFlow's
// ClusterCoordinator: it queues scheduled steps and hands them to the
// workers that ask (RunWorker), one at a time each, in the order
// scheduled; it collects their results into RemoteValues.
//
// Exactly once: every scheduled step has an id. A worker whose connection
// breaks, or that is silent for HeartbeatTimeout (a worker busy in a long
// step beats every quarter of it), is dropped, and the steps it had not
// reported go back to the front of the queue, for any worker. The first
// result reported for an id is the step's; later ones (from a dropped
// worker that finished after all) are discarded. A step function may thus
// run more than once, but each RemoteValue gets one result. A worker is
// one incarnation of an index (one RunWorker call): when another
// incarnation of the same index reaches the chief, the old one is dropped,
// its late results are discarded and it is told to exit.
//
// A step function's error fails its RemoteValue and the step is not run
// again; an unknown step name does the same. A parameter server's error
// (one with a method PSServer() (index int, addr string) in its chain, as
// the servers' errors have) fails the coordinator instead (Fail): every
// RemoteValue and Join then report it, naming the server, and errors.As
// finds the method in their errors.
//
// Schedule never blocks: the queue is unbounded, because the chief bounds
// how much it schedules (a few steps per worker ahead, then Join or Wait),
// as TensorFlow's chief loop does.
//
// NewCoordinator, Start, then Schedule and Join; Stop ends it. Methods are
// safe for concurrent use.
type Coordinator struct {
	onLost     func(index int) // CoordinatorConfig.OnWorkerLost
	onIdle     func(index int) // CoordinatorConfig.OnWorkerIdle
	lost       sync.WaitGroup  // running onLost and onIdle calls
	hb         time.Duration
	guard      *auth.Guard
	log        *slog.Logger
	rpc        *gorpc.Server
	handlers   lifecycle.Gate
	handshakes lifecycle.Conns
	stopping   chan struct{} // closed by Stop once workers heard it (or its bound passed)
	done       chan struct{} // closed when the owner goroutine is gone
	stopOnce   sync.Once

	mu      sync.Mutex
	spawned bool // Start ran the owner goroutine (which closes done)
	stopped bool
	addr    string
	nextID  uint64
	queue   []*coordStep // steps to hand out, front first; skips done ones
	order   []*coordStep // steps not known done, in id order (for Join)
	steps   map[uint64]*coordStep
	members map[coordWorkerID]*coordMember
	current map[int]uint64                    // worker index → its incarnation in the pool
	conns   map[string]*coordServerConn       // authenticated connections by remote address
	changed chan struct{}                     // closed and replaced on every change
	failErr error                             // set by Fail
	stepErr error                             // first step error since Join last returned
	stats   struct{ accepted, discarded int } // results taken and thrown away (tests)
}

// coordStep is one scheduled step.
type coordStep struct {
	id    uint64
	name  string
	args  []byte
	rv    *RemoteValue
	owner *coordMember // the worker running it; nil while queued
	done  bool
}

// coordMember is one incarnation of a worker, in the pool or not.
type coordMember struct {
	id       coordWorkerID
	remote   string // connection of its latest call
	seen     time.Time
	polling  int // Next calls being held
	running  map[uint64]*coordStep
	alive    bool   // in the pool
	replaced bool   // a newer incarnation took its index
	told     bool   // heard that the chief stopped
	polls    uint64 // Next calls received; only the latest may take a step
	idle     bool   // found the queue empty since it was last handed a step (onIdle called)
}

// NewCoordinator validates cfg and prepares a coordinator; it does not
// listen yet (Start).
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	switch {
	case cfg.Listener == nil && cfg.Addr == "":
		return nil, errors.New("ps: coordinator: neither a listener nor an address")
	case len(cfg.Secret) != auth.SecretSize:
		return nil, fmt.Errorf("ps: coordinator: secret is %d bytes, want %d", len(cfg.Secret), auth.SecretSize)
	case cfg.HeartbeatTimeout < 0:
		return nil, fmt.Errorf("ps: coordinator: negative heartbeat timeout %s", cfg.HeartbeatTimeout)
	}
	guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("ps: coordinator: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hb := cfg.HeartbeatTimeout
	if hb == 0 {
		hb = DefaultHeartbeatTimeout
	}
	c := &Coordinator{
		onLost:   cfg.OnWorkerLost,
		onIdle:   cfg.OnWorkerIdle,
		hb:       hb,
		guard:    guard,
		log:      log,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		steps:    make(map[uint64]*coordStep),
		members:  make(map[coordWorkerID]*coordMember),
		current:  make(map[int]uint64),
		conns:    make(map[string]*coordServerConn),
		changed:  make(chan struct{}),
	}
	c.rpc = &gorpc.Server{
		Addr:             cfg.Addr,
		Listener:         &coordListener{ln: cfg.Listener},
		Handler:          newCoordDispatcher(&coordService{c: c}).NewHandlerFunc(),
		OnConnect:        c.onConnect,
		LogError:         coordRPCLog(log),
		PendingResponses: coordRPCPending,
		SendBufferSize:   coordRPCBuffer,
		RecvBufferSize:   coordRPCBuffer,
	}
	return c, nil
}

// Start listens and serves in the background. It fails if listening
// fails, or the coordinator was started or stopped before.
func (c *Coordinator) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopped:
		return fmt.Errorf("%w: Start after Stop", ErrCoordinatorStopped)
	case c.spawned:
		return errors.New("ps: coordinator: Start called twice")
	}
	c.spawned = true
	errc := make(chan error, 1)
	go c.own(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("ps: coordinator: listen on %s: %w", c.rpc.Addr, err)
	}
	c.log.Info("ps: coordinator listening", "addr", c.addr, "heartbeat_timeout", c.hb)
	return nil
}

// own is the owner goroutine: the only one that calls gorpc's Start and
// Stop. Meanwhile it drops workers silent for the heartbeat timeout.
func (c *Coordinator) own(errc chan<- error) {
	defer close(c.done)
	if err := c.rpc.Start(); err != nil {
		errc <- err
		return
	}
	c.addr = c.rpc.Listener.ListenAddr().String() // Start holds c.mu
	errc <- nil
	tick := time.NewTicker(max(c.hb/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			c.reap()
			continue
		case <-c.stopping:
		}
		break
	}
	c.handlers.Shut()
	c.handshakes.CloseAll()
	c.rpc.Stop()
	c.handlers.Wait()
}

// reap drops the workers silent for the heartbeat timeout.
func (c *Coordinator) reap() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, m := range c.members {
		if m.alive && m.polling == 0 && now.Sub(m.seen) > c.hb {
			c.dropLocked(m, fmt.Sprintf("silent for %s", c.hb))
		}
	}
}

// Addr is the address the coordinator listens on, with the real port;
// empty before Start.
func (c *Coordinator) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// Schedule queues the step function registered as name on the workers,
// with args (copied; at most MaxStepBytes), and returns its RemoteValue at
// once. After Stop or Fail, or with oversized args, the RemoteValue has
// already failed.
func (c *Coordinator) Schedule(name string, args []byte) *RemoteValue {
	rv := &RemoteValue{name: name, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.failErr != nil:
		rv.resolve(nil, c.failErr)
		return rv
	case c.stopped:
		rv.resolve(nil, fmt.Errorf("%w: step %q scheduled after Stop", ErrCoordinatorStopped, name))
		return rv
	case len(args) > MaxStepBytes:
		c.failStepLocked(rv, fmt.Errorf("%w: step %q: %d bytes of arguments, at most %d", ErrTooLarge, name, len(args), MaxStepBytes))
		return rv
	}
	c.nextID++
	s := &coordStep{id: c.nextID, name: name, args: bytes.Clone(args), rv: rv}
	rv.id = s.id
	c.steps[s.id] = s
	c.order = append(c.order, s)
	c.queue = append(c.queue, s)
	c.notifyLocked()
	return rv
}

// Join waits until every step scheduled before it was called is done, and
// returns the first step error since the previous Join returned (clearing
// it), nil if there was none. After Fail it returns Fail's error at once;
// Stop fails the steps not done, so a Join of them returns an error that
// wraps ErrCoordinatorStopped. It returns ctx's error when ctx ends first.
func (c *Coordinator) Join(ctx context.Context) error {
	c.mu.Lock()
	last := c.nextID
	for {
		if c.failErr != nil {
			err := c.failErr
			c.mu.Unlock()
			return err
		}
		if c.lowestPendingLocked() > last {
			err := c.stepErr
			c.stepErr = nil
			c.mu.Unlock()
			return err
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

// lowestPendingLocked is the lowest id of a step not done yet (one past
// the last scheduled when all are done).
func (c *Coordinator) lowestPendingLocked() uint64 {
	for len(c.order) > 0 && c.order[0].done {
		c.order[0] = nil
		c.order = c.order[1:]
	}
	if len(c.order) == 0 {
		return c.nextID + 1
	}
	return c.order[0].id
}

// Workers is the number of workers in the pool now.
func (c *Coordinator) Workers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.members {
		if m.alive {
			n++
		}
	}
	return n
}

// Fail fails the job: every pending RemoteValue, every later one and
// every Join fail with an error that wraps ErrCoordinatorFailed and err
// (a dead parameter server, say). Workers stay connected, idle, until
// Stop. Only the first call counts.
func (c *Coordinator) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(err)
}

func (c *Coordinator) failLocked(err error) {
	if c.failErr != nil {
		return
	}
	if err == nil {
		c.failErr = ErrCoordinatorFailed
	} else {
		c.failErr = fmt.Errorf("%w: %w", ErrCoordinatorFailed, err)
	}
	c.log.Error("ps: coordinator failed", "err", err)
	c.endAllLocked(c.failErr)
}

// endAllLocked fails every step not done with err and empties the queue.
func (c *Coordinator) endAllLocked(err error) {
	for _, s := range c.order {
		if !s.done {
			s.done = true
			s.rv.resolve(nil, err)
		}
	}
	clear(c.steps)
	c.order, c.queue = nil, nil
	for _, m := range c.members {
		clear(m.running)
	}
	c.notifyLocked()
}

// Stop ends the coordinator: pending RemoteValues fail with ErrCoordinatorStopped,
// every worker's next call answers "stop" (RunWorker returns nil), and
// once the workers in the pool heard it and left (at most
// HeartbeatTimeout later: a busy worker hears it with its next heartbeat,
// and leaves when its step function returns) the coordinator closes
// its connections and listener and waits for its goroutines. Workers that
// reach it later find no chief. Stop is idempotent and safe from any
// goroutine.
func (c *Coordinator) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopped = true
		if len(c.steps) > 0 && c.stepErr == nil && c.failErr == nil {
			c.stepErr = fmt.Errorf("%w: %d steps were not done", ErrCoordinatorStopped, len(c.steps))
		}
		c.endAllLocked(fmt.Errorf("%w before the step was done", ErrCoordinatorStopped))
		spawned := c.spawned
		c.mu.Unlock()
		if !spawned {
			if l, ok := c.rpc.Listener.(*coordListener); ok && l.ln != nil {
				l.ln.Close() // the caller's listener, which Stop closes
			}
			close(c.done)
			return
		}
		c.awaitGone(time.Now().Add(c.hb))
		close(c.stopping)
	})
	<-c.done
	c.lost.Wait()
}

// awaitGone waits until every worker in the pool has left it, or
// deadline. Workers leave by closing their connection once they heard that
// the chief stopped; waiting for that, rather than for the answer to be
// handed to gorpc, keeps Stop from closing a connection on an answer not
// yet written.
func (c *Coordinator) awaitGone(deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		c.mu.Lock()
		left := 0
		for _, m := range c.members {
			if m.alive {
				left++
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			c.log.Warn("ps: coordinator: workers did not leave after Stop", "workers", left, "waited", c.hb)
			return
		}
	}
}

// notifyLocked wakes every goroutine waiting for a change.
func (c *Coordinator) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// failStepLocked fails one step's RemoteValue with a step error, which
// Join reports if it is the first.
func (c *Coordinator) failStepLocked(rv *RemoteValue, err error) {
	rv.resolve(nil, err)
	if c.stepErr == nil {
		c.stepErr = err
	}
}

// connOpened records an authenticated connection; false once stopped.
func (c *Coordinator) connOpened(sc *coordServerConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handshakes.IsClosed() {
		return false
	}
	c.conns[sc.remote] = sc
	return true
}

// connGone drops the workers whose latest call came on a connection that
// broke or closed: their process or network is gone, or their RunWorker
// returned.
func (c *Coordinator) connGone(sc *coordServerConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[sc.remote] != sc {
		return
	}
	delete(c.conns, sc.remote)
	for _, m := range c.members {
		if m.alive && m.remote == sc.remote {
			c.dropLocked(m, "connection closed")
		}
	}
}

// admitLocked finds or makes the member that called on remote and marks
// it seen. It returns nil for a call on a connection already gone (its
// answer would never be read, so it must not take a step).
func (c *Coordinator) admitLocked(id coordWorkerID, remote string) *coordMember {
	if c.conns[remote] == nil {
		return nil
	}
	m := c.members[id]
	if m == nil {
		if inc, ok := c.current[id.Index]; ok {
			if old := c.members[coordWorkerID{id.Index, inc}]; old != nil {
				c.dropLocked(old, "a new incarnation of its index joined")
				old.replaced = true
			}
		}
		m = &coordMember{id: id, running: make(map[uint64]*coordStep)}
		c.members[id] = m
		c.current[id.Index] = id.Incarnation
	}
	if m.replaced {
		return m
	}
	if !m.alive {
		m.alive = true
		c.log.Info("ps: worker joined the pool", "worker", id.Index, "remote", remote)
		c.notifyLocked()
	}
	m.seen = time.Now()
	m.remote = remote
	return m
}

// dropLocked takes m out of the pool and puts its unfinished steps back
// at the front of the queue, in id order.
func (c *Coordinator) dropLocked(m *coordMember, why string) {
	if !m.alive {
		return
	}
	m.alive = false
	back := c.requeueLocked(m)
	lvl := slog.LevelWarn
	if c.stopped || m.told {
		lvl = slog.LevelDebug
	}
	c.log.Log(context.Background(), lvl, "ps: worker left the pool", "worker", m.id.Index, "why", why, "requeued_steps", back)
	c.notifyLocked()
	if c.onLost != nil && !c.stopped && !m.told {
		c.lost.Add(1)
		go func(index int) {
			defer c.lost.Done()
			c.onLost(index)
		}(m.id.Index)
	}
}

// idleLocked tells onIdle, once per idle spell, that m asks for a step
// and the queue has none.
func (c *Coordinator) idleLocked(m *coordMember) {
	if m.idle || c.onIdle == nil || c.stopped || !m.alive {
		return
	}
	m.idle = true
	c.lost.Add(1)
	go func(index int) {
		defer c.lost.Done()
		c.onIdle(index)
	}(m.id.Index)
}

// requeueLocked puts the steps m runs back at the front of the queue.
func (c *Coordinator) requeueLocked(m *coordMember) int {
	if len(m.running) == 0 {
		return 0
	}
	back := make([]*coordStep, 0, len(m.running))
	for _, s := range m.running {
		s.owner = nil
		back = append(back, s)
	}
	clear(m.running)
	slices.SortFunc(back, func(a, b *coordStep) int { return cmp.Compare(a.id, b.id) })
	c.queue = append(back, c.queue...)
	c.notifyLocked()
	return len(back)
}

// popLocked takes the first queued step that is still to run.
func (c *Coordinator) popLocked() *coordStep {
	for len(c.queue) > 0 {
		s := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if !s.done && s.owner == nil {
			return s
		}
	}
	return nil
}

// answerLocked is what every call from m answers first: stop after Stop,
// replaced when a newer incarnation took its index; ok false otherwise.
func (c *Coordinator) answerLocked(m *coordMember) (a *coordAnswer, ok bool) {
	switch {
	case m.replaced:
		return &coordAnswer{Kind: coordAnsReplaced, HeartbeatTimeout: c.hb}, true
	case c.stopped:
		if !m.told {
			m.told = true
			c.notifyLocked()
		}
		return &coordAnswer{Kind: coordAnsStop, HeartbeatTimeout: c.hb}, true
	}
	return nil, false
}

// completeLocked records the first result of step s, reported by m.
func (c *Coordinator) completeLocked(s *coordStep, m *coordMember, r *coordDoneReq) {
	s.done = true
	delete(c.steps, s.id)
	if s.owner != nil {
		delete(s.owner.running, s.id)
		s.owner = nil
	}
	c.stats.accepted++
	where := fmt.Sprintf("step %q (id %d) on worker %d", s.name, s.id, m.id.Index)
	switch r.Outcome {
	case coordOK:
		s.rv.resolve(r.Result, nil)
	case coordUnknownStep:
		c.failStepLocked(s.rv, fmt.Errorf("%w %q: worker %d has step functions %s", ErrUnknownStep, s.name, m.id.Index, coordQuoteAll(r.Known)))
	case coordTooLarge:
		c.failStepLocked(s.rv, fmt.Errorf("%w: %s: %s", ErrTooLarge, where, r.Err))
	case coordServerError:
		msg := r.Err
		if !strings.Contains(msg, r.ServerAddr) {
			msg = fmt.Sprintf("ps: parameter server %d (%s): %s", r.ServerIndex, r.ServerAddr, msg)
		}
		c.failLocked(&remoteServerError{index: r.ServerIndex, addr: r.ServerAddr, worker: m.id.Index, step: s.name, msg: msg})
		s.rv.resolve(nil, c.failErr) // failLocked fails the steps not done, and s is done
	default: // coordStepError, or an outcome this version does not know
		c.failStepLocked(s.rv, fmt.Errorf("%w: %s: %s", ErrStepFailed, where, r.Err))
	}
	c.notifyLocked()
}

// coordQuoteAll lists names for messages: "a", "b" (or "none").
func coordQuoteAll(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// String names the coordinator by its address; it never shows the secret.
func (c *Coordinator) String() string { return "ps.Coordinator(" + c.Addr() + ")" }

// GoString is String, so %#v does not print the secret either.
func (c *Coordinator) GoString() string { return c.String() }

// RemoteValue is the future result of a scheduled step.
type RemoteValue struct {
	name string
	id   uint64
	done chan struct{}
	val  []byte
	err  error
}

// resolve sets the outcome once; the coordinator calls it under its lock
// exactly once per step.
func (r *RemoteValue) resolve(val []byte, err error) {
	r.val, r.err = val, err
	close(r.done)
}

// Wait returns the step's result once it is done, or its error (see
// Coordinator); it returns ctx's error if ctx ends first.
func (r *RemoteValue) Wait(ctx context.Context) ([]byte, error) {
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed once the step's result or error is known.
func (r *RemoteValue) Done() <-chan struct{} { return r.done }

// String names the step: `step "train" (id 3)`.
func (r *RemoteValue) String() string { return fmt.Sprintf("step %q (id %d)", r.name, r.id) }

// coordService holds the RPC methods gorpc's Dispatcher exposes as
// "Coordinator.<Method>". Every exported method is part of the wire
// protocol.
type coordService struct{ c *Coordinator }

// Next hands the calling worker the first queued step, waiting up to
// r.Wait (capped) for one. The worker asks only when it runs nothing, so
// any step the chief still thinks it runs was lost on the way (an answer
// that came after the worker's call had timed out) and goes back first.
func (v *coordService) Next(remote string, r *coordNextReq) (*coordAnswer, error) {
	c := v.c
	if !c.handlers.Enter() {
		return nil, ErrCoordinatorStopped
	}
	defer c.handlers.Leave()
	timer := time.NewTimer(min(max(r.Wait, 0), coordMaxPoll, c.hb/4))
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.admitLocked(r.Worker, remote)
	if m == nil {
		return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
	}
	c.requeueLocked(m)
	// A Next that the worker gave up on (its call timed out) may still be
	// held here when the worker asks again: only the latest hands out a
	// step, or the step would wait, unseen, until the worker's next poll.
	m.polls++
	poll := m.polls
	m.polling++
	defer func() { m.polling--; m.seen = time.Now() }()
	for {
		if a, ok := c.answerLocked(m); ok {
			return a, nil
		}
		if !m.alive || m.polls != poll { // its connection closed, or it asked again
			return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
		}
		if s := c.popLocked(); s != nil {
			s.owner = m
			m.running[s.id] = s
			m.idle = false
			return &coordAnswer{Kind: coordAnsStep, HeartbeatTimeout: c.hb, ID: s.id, Name: s.name, Args: s.args}, nil
		}
		c.idleLocked(m)
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
			c.mu.Lock()
		case <-timer.C:
			c.mu.Lock()
			if a, ok := c.answerLocked(m); ok {
				return a, nil
			}
			return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
		}
	}
}

// Heartbeat tells the chief that a worker busy in a step is alive.
func (v *coordService) Heartbeat(remote string, r *coordWorkerID) (*coordAnswer, error) {
	c := v.c
	if !c.handlers.Enter() {
		return nil, ErrCoordinatorStopped
	}
	defer c.handlers.Leave()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.admitLocked(*r, remote); m != nil {
		if a, ok := c.answerLocked(m); ok {
			return a, nil
		}
	}
	return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
}

// Done reports a step's outcome. The first report for an id is taken;
// a later one, or one from a replaced incarnation, is discarded.
func (v *coordService) Done(remote string, r *coordDoneReq) (*coordAnswer, error) {
	c := v.c
	if !c.handlers.Enter() {
		return nil, ErrCoordinatorStopped
	}
	defer c.handlers.Leave()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.admitLocked(r.Worker, remote)
	if m == nil {
		// Its connection is gone: the worker sees the call fail and
		// reports again on a new one.
		return nil, errors.New("ps: coordinator: connection closed")
	}
	if a, ok := c.answerLocked(m); ok {
		c.stats.discarded++
		return a, nil
	}
	delete(m.running, r.ID)
	s := c.steps[r.ID]
	if s == nil {
		c.stats.discarded++
		c.log.Debug("ps: late result discarded", "worker", m.id.Index, "step_id", r.ID)
		c.notifyLocked()
		return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
	}
	if len(r.Result) > MaxStepBytes {
		r.Outcome, r.Err, r.Result = coordTooLarge, fmt.Sprintf("%d bytes of result, at most %d", len(r.Result), MaxStepBytes), nil
	}
	c.completeLocked(s, m, r)
	return &coordAnswer{Kind: coordAnsNothing, HeartbeatTimeout: c.hb}, nil
}
