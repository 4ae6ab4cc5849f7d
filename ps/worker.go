package ps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// StepFunc is a step function that workers register under a name and the
// chief schedules by that name (Go cannot ship closures). It gets the
// scheduled arguments and returns the result that the chief's
// RemoteValue receives; both are at most MaxStepBytes. It must return
// soon after ctx ends: the chief stopped, the worker lost the chief, or
// RunWorker's context ended.
//
// A step may run more than once (see Coordinator: a worker dropped in the
// middle of it), so its effects should bear repeating, as a gradient step
// on parameter servers does.
type StepFunc func(ctx context.Context, w *WorkerContext, args []byte) ([]byte, error)

// WorkerContext is what a step function knows of the worker running it.
type WorkerContext struct {
	// Index and Workers are the worker's index and the number of workers
	// (TensorFlow's input context): shard the data by them.
	Index, Workers int
	// Client is connected to the parameter servers (WorkerConfig.Client;
	// under Run, attached to the variables before the first step).
	Client *Client

	// Logger is the worker's logger (never nil).
	Logger *slog.Logger
}

// WorkerConfig configures RunWorker.
//
// Its String and GoString leave the secret out.
type WorkerConfig struct {
	// ChiefAddr is where the coordinator listens (Job.ChiefAddr).
	ChiefAddr string
	// Secret is the 32-byte job secret.
	Secret []byte
	// TLS must match CoordinatorConfig.TLS.
	TLS bool
	// Logger receives the worker's logs; nil discards them.
	Logger *slog.Logger
	// Index is this worker's index, 0 ≤ Index < Workers.
	Index, Workers int
	// Steps are the step functions, by name; at least one.
	Steps map[string]StepFunc
	// Client, if set, is passed to every step in WorkerContext.
	Client *Client

	// HeartbeatTimeout is how long RunWorker tries to reach a chief it
	// has reached before, before it gives up (ErrChiefUnreachable). Zero
	// means the chief's CoordinatorConfig.HeartbeatTimeout, which the
	// worker learns from its first answer (DefaultHeartbeatTimeout
	// before). The worker beats at the chief's pace whatever this is.
	HeartbeatTimeout time.Duration
}

// String describes the config without its secret.
func (c WorkerConfig) String() string {
	return fmt.Sprintf("ps.WorkerConfig{ChiefAddr: %q, TLS: %t, Index: %d, Workers: %d, Steps: %s}",
		c.ChiefAddr, c.TLS, c.Index, c.Workers, coordQuoteAll(slices.Sorted(maps.Keys(c.Steps))))
}

// GoString is String, so %#v does not print the secret either.
func (c WorkerConfig) GoString() string { return c.String() }

func (c *WorkerConfig) validate() error {
	switch {
	case c.ChiefAddr == "":
		return errors.New("ps: worker: no chief address")
	case len(c.Secret) != auth.SecretSize:
		return fmt.Errorf("ps: worker: secret is %d bytes, want %d", len(c.Secret), auth.SecretSize)
	case c.Workers < 1 || c.Index < 0 || c.Index >= c.Workers:
		return fmt.Errorf("ps: worker: index %d of %d workers", c.Index, c.Workers)
	case len(c.Steps) == 0:
		return errors.New("ps: worker: no step functions")
	case c.HeartbeatTimeout < 0:
		return fmt.Errorf("ps: worker: negative heartbeat timeout %s", c.HeartbeatTimeout)
	}
	for name, f := range c.Steps {
		if f == nil {
			return fmt.Errorf("ps: worker: step function %q is nil", name)
		}
	}
	return nil
}

// coordMaxAuthFailures is after how many consecutive failed handshakes (that
// the chief took part in) RunWorker gives up: usually a wrong secret, or
// TLS on one side only.
const coordMaxAuthFailures = 3

// RunWorker joins the chief's worker pool and runs the steps it hands out,
// one at a time, reporting each result, until the chief stops (it returns
// nil) or something ends it:
//
//   - ctx ends: ctx's error;
//   - the chief, reached once, cannot be reached for the heartbeat timeout
//     (see WorkerConfig.HeartbeatTimeout): an error wrapping
//     ErrChiefUnreachable that names the chief;
//   - the chief rejects the handshake coordMaxAuthFailures times in a row: an
//     error wrapping auth.ErrAuth (a wrong secret, or TLS on one side);
//   - a newer RunWorker with the same index joined: ErrWorkerReplaced.
//
// Until it first reaches the chief it keeps trying, with back-off, as
// long as ctx allows: bound ctx by the job's start timeout. While a step
// runs it beats every quarter of the chief's heartbeat timeout; when the
// chief stops or is lost meanwhile, the step's context is cancelled and
// RunWorker returns once the step function has.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
	if err != nil {
		return fmt.Errorf("ps: worker: %w", err)
	}
	w := newCoordWorker(cfg, guard)
	go w.own()
	defer w.close()
	return w.run(ctx)
}

// coordWorker is one RunWorker: its identity, its client of the chief and
// what it learned from the chief.
type coordWorker struct {
	cfg   WorkerConfig
	id    coordWorkerID
	guard *auth.Guard
	log   *slog.Logger
	rpc   *gorpc.Client
	dc    *gorpc.DispatcherClient

	life   context.Context // ends when close starts
	cancel context.CancelFunc
	done   chan struct{} // closed when the owner goroutine is gone
	link   *coordLink
	conns  lifecycle.Conns
	calls  lifecycle.Gate

	chiefHB atomic.Int64 // the chief's heartbeat timeout (ns)
	lastOK  atomic.Int64 // time of the latest answer (UnixNano); 0: none yet
}

func newCoordWorker(cfg WorkerConfig, guard *auth.Guard) *coordWorker {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("worker", cfg.Index)
	w := &coordWorker{
		cfg:   cfg,
		id:    coordWorkerID{Index: cfg.Index, Incarnation: rand.Uint64()},
		guard: guard,
		log:   log,
		done:  make(chan struct{}),
		link:  newCoordLink(),
	}
	w.chiefHB.Store(int64(DefaultHeartbeatTimeout))
	w.life, w.cancel = context.WithCancel(context.Background())
	w.rpc = &gorpc.Client{
		Addr:               cfg.ChiefAddr,
		Conns:              1,
		DisableCompression: true,
		FlushDelay:         -1,
		PendingRequests:    coordRPCPending,
		SendBufferSize:     coordRPCBuffer,
		RecvBufferSize:     coordRPCBuffer,
		RequestTimeout:     DefaultHeartbeatTimeout,
		OnConnect:          w.onConnect,
		Dial:               w.dial,
		LogError:           coordRPCLog(log),
	}
	w.dc = newCoordDispatcher(nil).NewServiceClient(coordServiceName, w.rpc)
	return w
}

// own is the owner goroutine: the only one that calls gorpc's Start and
// Stop. It runs until close.
func (w *coordWorker) own() {
	defer close(w.done)
	w.rpc.Start()
	<-w.life.Done()
	w.conns.CloseAll() // unblocks a handshake in progress
	w.rpc.Stop()
}

// close stops the client and waits for its goroutines; a call abandoned
// by its caller ends within its timeout.
func (w *coordWorker) close() {
	w.calls.Shut()
	w.cancel()
	<-w.done
	w.calls.Wait()
}

// dial is gorpc's Dial: it paces attempts with back-off (gorpc would
// redial at once after a failed handshake) and tracks the connection so
// that close can close one that races it.
func (w *coordWorker) dial(addr string) (io.ReadWriteCloser, error) {
	for {
		if !w.link.pace(w.life) {
			return nil, errors.New("ps: worker: closed")
		}
		d := net.Dialer{Timeout: coordHandshakeTimeout, KeepAlive: 15 * time.Second}
		conn, err := d.DialContext(w.life, "tcp", addr)
		if err != nil {
			if w.life.Err() != nil {
				return nil, errors.New("ps: worker: closed")
			}
			w.link.failed(fmt.Errorf("dial %s: %w", addr, err), false)
			continue
		}
		tc := &coordTrackedConn{Conn: conn, set: &w.conns, link: w.link}
		if added, _ := w.conns.AddBelow(tc, coordNoLimit); !added {
			return nil, errors.New("ps: worker: closed")
		}
		return tc, nil
	}
}

// onConnect is gorpc's client OnConnect: the dialing side of the
// handshake, whose outcome feeds the link.
func (w *coordWorker) onConnect(_ string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", auth.ErrAuth, rwc)
	}
	heard := &coordHeardConn{Conn: conn}
	stream, hello, err := w.guard.Client(heard, []byte(coordHelloWorker), time.Now().Add(coordHandshakeTimeout))
	if err == nil && string(hello) != coordHelloChief {
		err = fmt.Errorf("%w: %s speaks %q, not the coordinator protocol", auth.ErrAuth, w.cfg.ChiefAddr, hello)
	}
	if err != nil {
		if w.life.Err() == nil {
			w.log.Warn("ps: worker: handshake with the chief failed", "chief", w.cfg.ChiefAddr, "err", err)
			w.link.failed(fmt.Errorf("handshake: %w", err), heard.heard)
		}
		return nil, err
	}
	w.link.connected()
	if stream == net.Conn(heard) {
		return conn, nil // in clear: gorpc reads the tracked connection itself
	}
	return stream, nil
}

// hb is the chief's heartbeat timeout, as last learned.
func (w *coordWorker) hb() time.Duration { return time.Duration(w.chiefHB.Load()) }

// giveUp is how long the worker tries to reach a chief it reached before.
func (w *coordWorker) giveUp() time.Duration {
	if w.cfg.HeartbeatTimeout > 0 {
		return w.cfg.HeartbeatTimeout
	}
	return w.hb()
}

// untilGiveUp is the time left before the worker gives up on the chief.
func (w *coordWorker) untilGiveUp() time.Duration {
	ok := w.lastOK.Load()
	if ok == 0 {
		return w.giveUp()
	}
	return w.giveUp() - time.Since(time.Unix(0, ok))
}

// pollWait is how long one Next call may be held by the chief.
func (w *coordWorker) pollWait() time.Duration { return min(time.Second, w.hb()/4) }

// heard records an answer from the chief.
func (w *coordWorker) heard(a *coordAnswer) {
	w.lastOK.Store(time.Now().UnixNano())
	if a.HeartbeatTimeout > 0 {
		w.chiefHB.Store(int64(a.HeartbeatTimeout))
	}
}

// lost is the error that ends RunWorker when the chief, reached before,
// has not answered for the give-up time; nil while there is hope.
func (w *coordWorker) lost(last error) error {
	ok := w.lastOK.Load()
	if ok == 0 || time.Since(time.Unix(0, ok)) <= w.giveUp() {
		return nil
	}
	if last == nil {
		last = errors.New("no answer")
	}
	return fmt.Errorf("%w: worker %d: the chief at %s did not answer for %s: %w",
		ErrChiefUnreachable, w.cfg.Index, w.cfg.ChiefAddr, w.giveUp(), last)
}

// errChiefStopped is what a call returns when the chief answered that it
// stopped; RunWorker then returns nil.
var errChiefStopped = errors.New("ps: the chief stopped")

// run is RunWorker's loop: ask for a step, run it, report it.
func (w *coordWorker) run(ctx context.Context) error {
	w.log.Debug("ps: worker starting", "chief", w.cfg.ChiefAddr, "incarnation", w.id.Incarnation)
	for {
		a, err := w.request(ctx, "Next", &coordNextReq{Worker: w.id, Wait: w.pollWait()}, w.pollWait())
		if err == nil && a.Kind == coordAnsStep {
			err = w.runStep(ctx, a)
		}
		switch {
		case errors.Is(err, errChiefStopped):
			w.log.Info("ps: worker: the chief stopped the job")
			return nil
		case err != nil:
			return err
		}
	}
}

// request makes one call, trying again while the chief is unreachable,
// until it answers (an answer of stop or replaced becomes an error), the
// chief is lost or rejects the secret, or ctx ends. Next and Done bear
// repeating: the chief requeues what a worker asking for a step held,
// and takes only the first result of a step.
func (w *coordWorker) request(ctx context.Context, method string, req any, wait time.Duration) (*coordAnswer, error) {
	for {
		if err := w.awaitLink(ctx); err != nil {
			return nil, err
		}
		start := time.Now()
		a, err := w.call(ctx, method, req, wait+w.hb())
		if err == nil {
			return a, w.verdict(a)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errChiefStopped) {
			return nil, err
		}
		if lost := w.lost(err); lost != nil {
			return nil, lost
		}
		w.log.Debug("ps: worker: call failed; trying again", "method", method, "err", err)
		if err := coordSleep(ctx, 50*time.Millisecond-time.Since(start)); err != nil {
			return nil, err
		}
	}
}

// verdict turns answers that end the worker into errors.
func (w *coordWorker) verdict(a *coordAnswer) error {
	switch a.Kind {
	case coordAnsStop:
		return errChiefStopped
	case coordAnsReplaced:
		return fmt.Errorf("%w: worker %d (incarnation %#x): the chief at %s has a newer one",
			ErrWorkerReplaced, w.cfg.Index, w.id.Incarnation, w.cfg.ChiefAddr)
	}
	return nil
}

// awaitLink waits until a connection to the chief is up, or gives up as
// request does.
func (w *coordWorker) awaitLink(ctx context.Context) error {
	for {
		up, authFails, lastErr, changed := w.link.state()
		switch {
		case up:
			return nil
		case authFails >= coordMaxAuthFailures:
			return fmt.Errorf("ps: worker %d: the chief at %s rejected %d handshakes (wrong job secret, or TLS on one side only?): %w",
				w.cfg.Index, w.cfg.ChiefAddr, authFails, lastErr)
		}
		if lost := w.lost(lastErr); lost != nil {
			return lost
		}
		t := time.NewTimer(max(w.giveUp()/8, time.Millisecond))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// call makes one attempt of method, bounded by timeout, ctx and close.
// The gorpc call runs in its own goroutine so that ctx interrupts the
// caller at once; that goroutine ends within timeout.
func (w *coordWorker) call(ctx context.Context, method string, req any, timeout time.Duration) (*coordAnswer, error) {
	if !w.calls.Enter() {
		return nil, errors.New("ps: worker: closed")
	}
	type result struct {
		resp any
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		defer w.calls.Leave()
		resp, err := w.dc.CallTimeout(method, req, timeout)
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			var ce *gorpc.ClientError
			if errors.As(r.err, &ce) && ce.Server && strings.HasPrefix(ce.Error(), ErrCoordinatorStopped.Error()) {
				return nil, errChiefStopped
			}
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		a, ok := r.resp.(*coordAnswer)
		if !ok {
			return nil, fmt.Errorf("%s: the chief answered %T", method, r.resp)
		}
		w.heard(a)
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runStep runs one step while beating, and reports its outcome.
func (w *coordWorker) runStep(ctx context.Context, a *coordAnswer) error {
	req := &coordDoneReq{Worker: w.id, ID: a.ID}
	f := w.cfg.Steps[a.Name]
	if f == nil {
		req.Outcome, req.Known = coordUnknownStep, slices.Sorted(maps.Keys(w.cfg.Steps))
		w.log.Warn("ps: worker: unknown step function", "step", a.Name)
	} else {
		stepCtx, cancel := context.WithCancel(ctx)
		beat := make(chan error, 1)
		go func() { beat <- w.beat(stepCtx, cancel) }()
		res, err := w.invoke(stepCtx, f, a.Args)
		cancel()
		if end := <-beat; end != nil {
			return end // stopped, replaced or lost meanwhile
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var sf serverFailure
		switch {
		case err != nil && errors.As(err, &sf):
			req.Outcome, req.Err = coordServerError, err.Error()
			req.ServerIndex, req.ServerAddr = sf.PSServer()
		case err != nil:
			req.Outcome, req.Err = coordStepError, err.Error()
		case len(res) > MaxStepBytes:
			req.Outcome, req.Err = coordTooLarge, fmt.Sprintf("%d bytes of result, at most %d", len(res), MaxStepBytes)
		default:
			req.Result = res
		}
		if err != nil {
			w.log.Debug("ps: worker: step failed", "step", a.Name, "id", a.ID, "err", err)
		}
	}
	_, err := w.request(ctx, "Done", req, 0)
	return err
}

// invoke runs a step function; a panic becomes the step's error, so that
// one bad step does not kill every worker it is requeued to in turn.
func (w *coordWorker) invoke(ctx context.Context, f StepFunc, args []byte) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("ps: worker: step function panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("step function panicked: %v", p)
		}
	}()
	return f(ctx, &WorkerContext{Index: w.cfg.Index, Workers: w.cfg.Workers, Client: w.cfg.Client, Logger: w.log}, args)
}

// beat tells the chief every quarter of its heartbeat timeout that this
// worker is alive, until ctx ends (nil). When the chief answers stop or
// replaced, or is lost, it cancels the step and returns why.
func (w *coordWorker) beat(ctx context.Context, cancel context.CancelFunc) error {
	for {
		if err := coordSleep(ctx, max(w.hb()/4, time.Millisecond)); err != nil {
			return nil
		}
		// A beat may take until the worker would give up: on a loaded
		// machine an answer can be slow, and one slow answer must not be
		// what makes the worker give up (nor miss the chief's stop).
		a, err := w.call(ctx, "Heartbeat", &w.id, max(w.untilGiveUp(), w.hb()/4, time.Millisecond))
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = w.verdict(a)
			if err == nil {
				continue
			}
		} else if !errors.Is(err, errChiefStopped) {
			if err = w.lost(err); err == nil {
				continue
			}
		}
		cancel()
		return err
	}
}

// coordSleep waits d (if positive), returning early with ctx's error.
func coordSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
