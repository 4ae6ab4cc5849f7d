package ps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// Defaults of ServerConfig and ClientConfig.
const (
	// srvHandshakeTimeout bounds the authentication of one connection.
	srvHandshakeTimeout = 5 * time.Second
	// DefaultOpTimeout is ServerConfig.OpTimeout when it is zero: how long
	// a worker may stay silent before the staleness bound stops waiting
	// for it (as settings.DefaultOpTimeout bounds every wait for a rank).
	DefaultOpTimeout = 10 * time.Minute
	// srvMaxHandshakes bounds the connections a server authenticates at
	// once; one more is closed at once.
	srvMaxHandshakes = 256
	// srvShutdownLinger bounds how long Serve, once a client called
	// Shutdown, waits for its clients to hang up before it stops the
	// server, so that the answer to Shutdown reaches the caller.
	srvShutdownLinger = time.Second
)

// ServerConfig configures a parameter Server.
type ServerConfig struct {
	// Listener, when not nil, is where the server accepts connections (a
	// Job's, already listening on its published address); the server owns
	// it and closes it in Stop. When nil, Start listens on Addr.
	Listener net.Listener
	// Addr is the TCP address to listen on when Listener is nil
	// ("127.0.0.1:0" style; port 0 picks a free port, see Server.Addr).
	Addr string
	// Secret is the 32-byte job secret (auth.SecretSize).
	Secret []byte
	// TLS runs every connection inside TLS 1.3 keyed from Secret (see
	// auth.Guard); clients must set ClientConfig.TLS the same way.
	TLS bool
	// Index is the server's index among the job's servers (0 to N-1): the
	// position of its address in every client's DialServers list.
	Index int
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Staleness is the stale-synchronous bound K: 0 is asynchronous (a
	// Pull never waits); K > 0 holds a worker's Pull while its clock (its
	// pushes) exceeds the slowest active worker's by more than K.
	Staleness int
	// OpTimeout is how long a worker may go unheard (no Pull, no Push)
	// before the staleness bound stops waiting for it; zero means
	// DefaultOpTimeout. It is not in the contract: it carries the
	// job's op timeout (Job.OpTimeout) to the server.
	OpTimeout time.Duration
}

func (c *ServerConfig) validate() error {
	switch {
	case c.Listener == nil && c.Addr == "":
		return fmt.Errorf("%w: neither a listener nor an address", ErrConfig)
	case len(c.Secret) != auth.SecretSize:
		return fmt.Errorf("%w: secret is %d bytes, want %d", ErrConfig, len(c.Secret), auth.SecretSize)
	case c.Index < 0:
		return fmt.Errorf("%w: negative server index %d", ErrConfig, c.Index)
	case c.Staleness < 0:
		return fmt.Errorf("%w: negative staleness %d", ErrConfig, c.Staleness)
	case c.OpTimeout < 0:
		return fmt.Errorf("%w: negative op timeout %s", ErrConfig, c.OpTimeout)
	}
	return nil
}

// Server is one parameter server: it holds the shards of the variables
// that Place assigned to its index, applies pushed gradients to them with
// the optimizer, and answers pulls.
//
// NewServer, then Start; Stop ends it. One owner goroutine, created by
// Start, calls gorpc's Start and Stop, as gorpc requires.
type Server struct {
	cfg   ServerConfig
	guard *auth.Guard
	log   *slog.Logger
	rpc   *gorpc.Server

	handlers   lifecycle.Gate  // running handlers
	handshakes lifecycle.Conns // connections inside the auth handshake
	live       lifecycle.Conns // authenticated connections
	dataConns  lifecycle.Conns // data links being served
	refusing   atomic.Bool
	stopping   chan struct{} // closed by Stop: wakes blocked handlers
	done       chan struct{} // closed when the owner goroutine is gone
	shutdown   chan struct{} // closed by the first Shutdown call
	shutOnce   sync.Once
	created    chan struct{} // closed by the first successful Create

	pushes atomic.Int64 // the step: pushes applied (Load sets it)
	clocks *srvClocks
	served srvServed // for Stats

	mu      sync.Mutex
	spawned bool
	addr    string
	stop    sync.Once
	table   *srvTable // set once by Create, then read-only

	onWait func() // test hook: a Pull starts waiting for the staleness bound
}

// srvTable is what Create gave a server: the whole layout, the optimizer,
// and the state of this server's shards in layout order.
type srvTable struct {
	layout srvLayoutWire
	opt    Optimizer
	shards []*shardState
	bytes  int // of this server's values: the length of every Pull, Push and Load
}

// NewServer validates cfg and prepares a server; it does not accept
// connections yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	cfg.Secret = slices.Clone(cfg.Secret)
	guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Server{
		cfg:      cfg,
		guard:    guard,
		log:      cfg.Logger.With("ps_server", cfg.Index),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		shutdown: make(chan struct{}),
		created:  make(chan struct{}),
		clocks:   newSrvClocks(cfg.Staleness, cfg.OpTimeout),
	}
	s.rpc = &gorpc.Server{
		Addr:             cfg.Addr,
		Handler:          newSrvDispatcher(&srvService{s: s}).NewHandlerFunc(),
		OnConnect:        s.onConnect,
		LogError:         srvDebugLogger(s.log),
		FlushDelay:       -1,
		PendingResponses: srvRPCPending,
		SendBufferSize:   srvRPCBuffer,
		RecvBufferSize:   srvRPCBuffer,
	}
	return s, nil
}

// Start starts accepting connections in the background. It fails if
// listening fails or the server was started or stopped before.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopping:
		return fmt.Errorf("%w: Start after Stop", ErrStopped)
	default:
	}
	if s.spawned {
		return fmt.Errorf("%w: Start called twice", ErrConfig)
	}
	l := s.cfg.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", s.cfg.Addr); err != nil {
			return fmt.Errorf("%w: listen on %s: %w", ErrConfig, s.cfg.Addr, err)
		}
	}
	s.rpc.Listener = srvListener{l}
	s.spawned = true
	errc := make(chan error, 1)
	go s.own(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("%w: serve on %s: %w", ErrConfig, l.Addr(), err)
	}
	s.addr = l.Addr().String()
	s.log.Info("ps: parameter server listening", "addr", s.addr, "staleness", s.cfg.Staleness)
	return nil
}

// own is the owner goroutine: the only one that calls gorpc's Start and
// Stop. It reports Start's outcome on errc, then waits for Stop.
func (s *Server) own(errc chan<- error) {
	defer close(s.done)
	if err := s.rpc.Start(); err != nil {
		s.rpc.Listener.Close()
		errc <- err
		return
	}
	errc <- nil
	<-s.stopping
	s.handshakes.CloseAll()
	s.dataConns.CloseAll() // data links run inside gorpc's connection goroutines, which Stop waits for
	s.rpc.Stop()
	s.live.CloseAll()
	s.handlers.Wait()
}

// Addr is the address the server listens on, with the real port; empty
// before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Done is closed once a client called Shutdown.
func (s *Server) Done() <-chan struct{} { return s.shutdown }

// Stop wakes blocked calls, closes every connection and the listener and
// returns when the server's goroutines are gone. It is idempotent and
// safe from any goroutine.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.mu.Lock()
		s.handlers.Shut()
		close(s.stopping)
		spawned := s.spawned
		s.mu.Unlock()
		if !spawned {
			if s.cfg.Listener != nil {
				s.cfg.Listener.Close()
			}
			close(s.done)
		}
	})
	<-s.done
}

// Serve runs a server until a client calls Shutdown (it returns nil) or
// ctx ends (it returns ctx's error): NewServer, Start, wait, Stop. After
// Shutdown it gives its clients up to a second to hang up first, so that
// the answer to Shutdown reaches its caller.
func Serve(ctx context.Context, cfg ServerConfig) error {
	return serve(ctx, cfg, nil)
}

// statsEvery is how often a server of a job gives its Stats to gorun's
// metrics (Run).
const statsEvery = time.Second

// serve is Serve; report, if not nil, gets the server's Stats every
// statsEvery while they change, and once more as it returns.
func serve(ctx context.Context, cfg ServerConfig, report func(ServerStats)) error {
	s, err := NewServer(cfg)
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return err
	}
	if err := s.Start(); err != nil {
		s.Stop()
		return err
	}
	defer s.Stop()
	if report != nil {
		stop, done := make(chan struct{}), make(chan struct{})
		go s.report(report, stop, done)
		defer func() { // after the linger: what the last Pushes and Pulls served
			close(stop)
			<-done
		}()
	}
	select {
	case <-s.Done():
		s.live.WaitEmpty(ctx, srvShutdownLinger)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report gives f the server's Stats every statsEvery when they changed
// since the last, and once more when stop closes ("ps-server-stats").
func (s *Server) report(f func(ServerStats), stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(statsEvery)
	defer t.Stop()
	var last ServerStats
	for {
		select {
		case <-t.C:
		case <-stop:
			f(s.Stats())
			return
		}
		st := s.Stats()
		if st.Step != last.Step || st.Pushes != last.Pushes || st.Pulls != last.Pulls {
			f(st)
			last = st
		}
	}
}

// String names the server by its index and address; it never shows the
// secret.
func (s *Server) String() string {
	return fmt.Sprintf("ps.Server(%d, %s)", s.cfg.Index, s.Addr())
}

// onConnect is the server's gorpc OnConnect hook: the mutual HMAC
// handshake (inside TLS with ServerConfig.TLS), under
// srvHandshakeTimeout, before gorpc reads a byte; then the stream's
// messages are bounded (srvFrameConn). A peer that fails is logged (remote
// address only) and dropped. At most srvMaxHandshakes connections are
// inside the handshake at once; Stop closes those, so it never waits for
// the deadline.
func (s *Server) onConnect(remote string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", ErrAuth, rwc)
	}
	added, full := s.handshakes.AddBelow(conn, srvMaxHandshakes)
	if full {
		if !s.refusing.Swap(true) {
			s.log.Warn("ps: refused connections: too many in the handshake at once", "remote", remote, "limit", srvMaxHandshakes)
		}
		return nil, fmt.Errorf("%w: %s: refused: %d connections in the handshake", ErrAuth, remote, srvMaxHandshakes)
	}
	if !added {
		return nil, ErrStopped
	}
	s.refusing.Store(false)
	defer s.handshakes.Remove(conn)
	stream, hello, err := s.guard.Server(conn, []byte(srvHelloServer), time.Now().Add(srvHandshakeTimeout))
	if err == nil && string(hello) == srvHelloData {
		// A data link: served here, on the goroutine gorpc gave this
		// connection, then handed back closed.
		s.handshakes.Remove(conn)
		s.serveData(stream)
		return nil, errDataLinkDone
	}
	if err == nil && string(hello) != srvHelloClient {
		err = fmt.Errorf("%w: peer speaks %q, not the parameter-server protocol", auth.ErrAuth, hello)
	}
	if err != nil {
		if !s.handshakes.IsClosed() {
			s.log.Warn("ps: rejected connection", "remote", remote, "err", err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrAuth, remote, err)
	}
	lc := &srvLiveConn{srvFrameConn: newSrvFrameConn(stream, srvMaxMessage, true), set: &s.live}
	if !s.live.Add(lc) {
		return nil, ErrStopped
	}
	return lc, nil
}

// errDataLinkDone tells gorpc that a connection was a data link, served
// and ended in OnConnect.
var errDataLinkDone = errors.New("ps: data link ended")

// srvLiveConn is an authenticated connection; it leaves its set when gorpc
// closes it.
type srvLiveConn struct {
	*srvFrameConn
	set *lifecycle.Conns
}

// Close untracks and closes the connection.
func (c *srvLiveConn) Close() error {
	c.set.Remove(c)
	return c.srvFrameConn.Close()
}

// enter admits a handler, or fails once the server is stopping.
func (s *Server) enter() error {
	if !s.handlers.Enter() {
		return fmt.Errorf("%w: server %d is stopping", ErrStopped, s.cfg.Index)
	}
	return nil
}

// tbl is the table Create set, or an ErrNotCreated error.
func (s *Server) tbl() (*srvTable, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		return nil, fmt.Errorf("%w: server %d has no variables yet", ErrNotCreated, s.cfg.Index)
	}
	return s.table, nil
}

// wait blocks up to d (at most srvMaxWait) for ch, returning false when d
// passed first; it fails once the server stops.
func (s *Server) wait(ch <-chan struct{}, d time.Duration) (bool, error) {
	d = min(max(d, 0), srvMaxWait)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true, nil
	case <-t.C:
		return false, nil
	case <-s.stopping:
		return false, fmt.Errorf("%w: server %d is stopping", ErrStopped, s.cfg.Index)
	}
}

func srvCheckWorker(w int) error {
	if w < -1 || w >= srvMaxWorkerID {
		return fmt.Errorf("%w: worker id %d out of range [-1, %d)", ErrBadRequest, w, srvMaxWorkerID)
	}
	return nil
}

// srvService holds the RPC methods that gorpc's Dispatcher exposes as
// "ParameterServer.<Method>". Every exported method here is part of the
// wire protocol.
type srvService struct{ s *Server }

// Create installs the layout, the optimizer and this server's initial
// values. A second Create with the same layout and optimizer succeeds
// and changes nothing (values stay: Load restores them); one with
// another fails with ErrLayout.
func (v *srvService) Create(remote string, r *srvCreateReq) error {
	s := v.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.handlers.Leave()
	if r.Index != s.cfg.Index {
		return fmt.Errorf("%w: this is server %d, the client calls it server %d (address lists differ?)", ErrBadRequest, s.cfg.Index, r.Index)
	}
	opt := r.Opt.withDefaults()
	if err := opt.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	sizes, err := srvCheckLayout(&r.Layout, s.cfg.Index)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	total := 0
	for _, n := range sizes {
		total += 8 * n
	}
	if len(r.Values) != total {
		return fmt.Errorf("%w: Create carries %d bytes of values, the layout gives server %d %d", ErrBadRequest, len(r.Values), s.cfg.Index, total)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.table; t != nil {
		if t.opt != opt || !srvLayoutsEqual(t.layout, r.Layout) {
			return fmt.Errorf("%w: server %d already holds variables with another layout or optimizer", ErrLayout, s.cfg.Index)
		}
		return nil
	}
	t := &srvTable{layout: r.Layout, opt: opt, bytes: total, shards: make([]*shardState, len(sizes))}
	off := 0
	for i, n := range sizes {
		t.shards[i] = newShardState(n, opt)
		readFloats(t.shards[i].w, r.Values[off:off+8*n])
		off += 8 * n
	}
	s.table = t
	close(s.created)
	s.log.Info("ps: variables created", "vars", len(r.Layout.Vars), "shards", len(sizes), "bytes", total, "optimizer", opt.Kind, "remote", remote)
	return nil
}

// Layout answers the layout and optimizer, waiting up to r.Wait (at most
// srvMaxWait) for Create; Ready is false if it has not run by then.
func (v *srvService) Layout(r *srvLayoutReq) (*srvLayoutResp, error) {
	s := v.s
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.handlers.Leave()
	if ok, err := s.wait(s.created, r.Wait); err != nil || !ok {
		return &srvLayoutResp{Index: s.cfg.Index}, err
	}
	t, err := s.tbl()
	if err != nil {
		return nil, err
	}
	return &srvLayoutResp{Index: s.cfg.Index, Ready: true, Layout: t.layout, Opt: t.opt}, nil
}

// Pull answers this server's values and its step (pushes applied). With
// a staleness bound, a worker's Pull first waits (up to r.Wait, at most
// srvMaxWait) until its clock is within the bound; Ready is false if it
// is not by then.
func (v *srvService) Pull(r *srvPullReq) (*srvPullResp, error) {
	s := v.s
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.handlers.Leave()
	if err := srvCheckWorker(r.Worker); err != nil {
		return nil, err
	}
	t, err := s.tbl()
	if err != nil {
		return nil, err
	}
	if !r.Wire.valid() {
		return nil, fmt.Errorf("%w: Pull: unknown wire type %d", ErrBadRequest, int(r.Wire))
	}
	ok, err := s.clocks.await(r.Worker, min(max(r.Wait, 0), srvMaxWait), s.stopping, s.onWait)
	if err != nil {
		return nil, fmt.Errorf("%w: server %d is stopping", ErrStopped, s.cfg.Index)
	}
	if !ok {
		return &srvPullResp{}, nil
	}
	buf := s.values(t, make([]byte, 0, t.bytes/8*r.Wire.size()), r.Wire)
	step := s.pushes.Load()
	s.served.pulled(r.Worker, len(buf), step)
	return &srvPullResp{Ready: true, Step: step, Values: buf}, nil
}

// values appends this server's values to buf as w's values, each shard
// read under its lock.
func (s *Server) values(t *srvTable, buf []byte, w Wire) []byte {
	for _, sh := range t.shards {
		sh.mu.Lock()
		buf = appendValues(buf, sh.w, w)
		sh.mu.Unlock()
	}
	return buf
}

// push applies g (all of this server's values' gradients, in layout
// order, wireBytes on the wire) shard by shard, each under its lock,
// then counts the push.
func (s *Server) push(t *srvTable, g []float64, worker, wireBytes int) {
	s.served.pushed(worker, wireBytes, s.pushes.Load())
	off := 0
	for _, sh := range t.shards {
		n := len(sh.w)
		sh.mu.Lock()
		sh.apply(t.opt, g[off:off+n])
		sh.mu.Unlock()
		off += n
	}
	s.pushes.Add(1)
	s.clocks.push(worker)
}

// Push applies one gradient for each of this server's shards with the
// optimizer, each under its shard's lock, then counts the push (the step,
// and the worker's clock).
func (v *srvService) Push(r *srvPushReq) error {
	s := v.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.handlers.Leave()
	if err := srvCheckWorker(r.Worker); err != nil {
		return err
	}
	t, err := s.tbl()
	if err != nil {
		return err
	}
	if !r.Wire.valid() {
		return fmt.Errorf("%w: Push: unknown wire type %d", ErrBadRequest, int(r.Wire))
	}
	if want := t.bytes / 8 * r.Wire.size(); len(r.Grads) != want {
		return fmt.Errorf("%w: Push carries %d bytes of %v gradients, server %d holds %d values (%d bytes)", ErrBadRequest, len(r.Grads), r.Wire, s.cfg.Index, t.bytes/8, want)
	}
	s.push(t, srvGrads(r.Grads, r.Wire), r.Worker, len(r.Grads))
	return nil
}

// srvGrads reads a Push's gradient: float64 on a little-endian host is
// the message's own memory seen as float64s (no copy); otherwise the
// values are decoded into a new slice.
func srvGrads(b []byte, w Wire) []float64 {
	n := len(b) / w.size()
	if n == 0 {
		return nil
	}
	if w == WireFloat64 && hostLittle && uintptr(unsafe.Pointer(&b[0]))%8 == 0 {
		return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), n)
	}
	g := make([]float64, n)
	readValues(g, b, w)
	return g
}

// Load overwrites this server's values and its step, and zeroes the
// optimizer's slots (Adam's step count starts again at 0).
func (v *srvService) Load(r *srvLoadReq) error {
	s := v.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.handlers.Leave()
	t, err := s.tbl()
	if err != nil {
		return err
	}
	if len(r.Values) != t.bytes {
		return fmt.Errorf("%w: Load carries %d bytes of values, server %d holds %d", ErrBadRequest, len(r.Values), s.cfg.Index, t.bytes)
	}
	if r.Step < 0 {
		return fmt.Errorf("%w: negative step %d", ErrBadRequest, r.Step)
	}
	off := 0
	for _, sh := range t.shards {
		n := 8 * len(sh.w)
		sh.mu.Lock()
		readFloats(sh.w, r.Values[off:off+n])
		sh.reset()
		sh.mu.Unlock()
		off += n
	}
	s.pushes.Store(r.Step)
	s.log.Info("ps: values loaded", "step", r.Step)
	return nil
}

// Drop stops counting a worker for the staleness bound until it is heard
// from again.
func (v *srvService) Drop(r *srvWorkerReq) error {
	s := v.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.handlers.Leave()
	if err := srvCheckWorker(r.Worker); err != nil {
		return err
	}
	s.clocks.drop(r.Worker)
	return nil
}

// Shutdown closes the server's Done channel.
func (v *srvService) Shutdown() error {
	s := v.s
	if err := s.enter(); err != nil {
		return err
	}
	defer s.handlers.Leave()
	s.shutOnce.Do(func() {
		s.log.Info("ps: shutdown requested")
		close(s.shutdown)
	})
	return nil
}

// Ping answers at once.
func (v *srvService) Ping() error {
	if err := v.s.enter(); err != nil {
		return err
	}
	v.s.handlers.Leave()
	return nil
}

// ServerStats is what a Server has served since it started (Stats).
type ServerStats struct {
	Step     int64 // the server's step: the pushes it applied, or what Load set
	Pushes   int64 // pushes applied
	Pulls    int64 // pulls answered with values
	BytesIn  int64 // bytes of the pushes' gradients, as they came (float32 or float64)
	BytesOut int64 // bytes of the pulls' values, as they went
	// Staleness[w], for each worker id w that pushed after a Pull, is the
	// staleness of its last push here: the pushes of others that the
	// server applied between that worker's last Pull and the push, so
	// how many updates the gradient was late by on this server.
	Staleness map[int]int64
}

// Stats returns what the server has served so far. It is safe to call
// at any time, from any goroutine; it never waits for a handler.
func (s *Server) Stats() ServerStats {
	st := ServerStats{Step: s.pushes.Load()}
	s.served.read(&st)
	return st
}

// srvServed counts what a server served, for Stats.
type srvServed struct {
	pushes, pulls, in, out atomic.Int64

	mu      sync.Mutex
	workers map[int]*srvServedWorker
}

// srvServedWorker is one worker's part of srvServed.
type srvServedWorker struct {
	pulledAt  int64 // the step its last Pull answered
	own       int64 // its pushes since that Pull
	staleness int64 // of its last push after a Pull
	pulled    bool  // it has pulled
	known     bool  // staleness is set
}

// worker returns worker w's counts, creating them; c.mu is held.
func (c *srvServed) worker(w int) *srvServedWorker {
	if c.workers == nil {
		c.workers = map[int]*srvServedWorker{}
	}
	wk := c.workers[w]
	if wk == nil {
		wk = &srvServedWorker{}
		c.workers[w] = wk
	}
	return wk
}

// pulled counts a Pull of worker w (w < 0: not a worker) answered with
// bytes of values at step.
func (c *srvServed) pulled(w, bytes int, step int64) {
	c.pulls.Add(1)
	c.out.Add(int64(bytes))
	if w < 0 {
		return
	}
	c.mu.Lock()
	wk := c.worker(w)
	wk.pulledAt, wk.own, wk.pulled = step, 0, true
	c.mu.Unlock()
}

// pushed counts a push of worker w of bytes, about to be applied at
// step (the pushes applied before it).
func (c *srvServed) pushed(w, bytes int, step int64) {
	c.pushes.Add(1)
	c.in.Add(int64(bytes))
	if w < 0 {
		return
	}
	c.mu.Lock()
	if wk := c.worker(w); wk.pulled {
		wk.staleness, wk.known = max(step-wk.pulledAt-wk.own, 0), true
		wk.own++
	}
	c.mu.Unlock()
}

// read fills st's counts.
func (c *srvServed) read(st *ServerStats) {
	st.Pushes, st.Pulls, st.BytesIn, st.BytesOut = c.pushes.Load(), c.pulls.Load(), c.in.Load(), c.out.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	for w, wk := range c.workers {
		if wk.known {
			if st.Staleness == nil {
				st.Staleness = map[int]int64{}
			}
			st.Staleness[w] = wk.staleness
		}
	}
}

// srvCheckLayout checks a layout from the wire and returns the element count
// of each of server index's shards, in layout order. It bounds everything
// before anything is allocated from it.
func srvCheckLayout(l *srvLayoutWire, index int) ([]int, error) {
	if l.Servers < 1 || index >= l.Servers {
		return nil, fmt.Errorf("layout for %d servers, this is server %d", l.Servers, index)
	}
	if len(l.Vars) == 0 || len(l.Vars) > srvMaxVars {
		return nil, fmt.Errorf("layout has %d variables, want 1 to %d", len(l.Vars), srvMaxVars)
	}
	names := make(map[string]bool, len(l.Vars))
	var sizes []int
	shards, bytes := 0, int64(0)
	for _, v := range l.Vars {
		if v.Name == "" || len(v.Name) > srvMaxNameLen {
			return nil, fmt.Errorf("variable name %.40q: want 1 to %d bytes", v.Name, srvMaxNameLen)
		}
		if names[v.Name] {
			return nil, fmt.Errorf("variable %q appears twice", v.Name)
		}
		names[v.Name] = true
		if len(v.Shape) == 0 || len(v.Shape) > srvMaxDims {
			return nil, fmt.Errorf("variable %q: %d dimensions, want 1 to %d", v.Name, len(v.Shape), srvMaxDims)
		}
		rowElems := int64(1)
		for i, d := range v.Shape {
			if d <= 0 {
				return nil, fmt.Errorf("variable %q: shape %v has a non-positive dimension", v.Name, v.Shape)
			}
			if i > 0 {
				if rowElems > MaxServerBytes/int64(d) {
					return nil, fmt.Errorf("variable %q: shape %v: a row is too large", v.Name, v.Shape)
				}
				rowElems *= int64(d)
			}
		}
		if len(v.Shards) == 0 || len(v.Shards) > v.Shape[0] {
			return nil, fmt.Errorf("variable %q: %d shards for %d rows", v.Name, len(v.Shards), v.Shape[0])
		}
		if shards += len(v.Shards); shards > srvMaxShards {
			return nil, fmt.Errorf("layout has more than %d shards", srvMaxShards)
		}
		next := 0
		for k, sh := range v.Shards {
			if sh.Start != next || sh.End <= sh.Start || sh.End > v.Shape[0] || sh.Server < 0 || sh.Server >= l.Servers {
				return nil, fmt.Errorf("variable %q: shard %d (rows %d-%d on server %d) does not continue rows 0-%d of %d on one of %d servers",
					v.Name, k, sh.Start, sh.End, sh.Server, next, v.Shape[0], l.Servers)
			}
			next = sh.End
			if sh.Server != index {
				continue
			}
			elems := int64(sh.End-sh.Start) * rowElems // both ≤ MaxServerBytes: no overflow
			if bytes += 8 * elems; bytes > MaxServerBytes {
				return nil, fmt.Errorf("server %d would hold more than %d bytes", index, MaxServerBytes)
			}
			sizes = append(sizes, int(elems))
		}
		if next != v.Shape[0] {
			return nil, fmt.Errorf("variable %q: shards cover rows 0-%d of %d", v.Name, next, v.Shape[0])
		}
	}
	return sizes, nil
}

func srvLayoutsEqual(a, b srvLayoutWire) bool {
	return a.Servers == b.Servers && slices.EqualFunc(a.Vars, b.Vars, func(x, y srvVarWire) bool {
		return x.Name == y.Name && slices.Equal(x.Shape, y.Shape) && slices.Equal(x.Shards, y.Shards)
	})
}

// srvClocks keeps the workers' clocks (their pushes) for the staleness
// bound. A worker counts once heard from (a Pull or a Push with its id)
// and stops counting when Drop names it or it is unheard for the op
// timeout; heard from again, it counts again. A worker that starts (or
// starts again) to count begins at no less than the slowest active
// worker's clock, so a late joiner does not hold the others back.
type srvClocks struct {
	k       int64
	timeout time.Duration

	mu      sync.Mutex
	workers map[int]*srvWorker
	changed chan struct{} // closed and replaced at every change
}

type srvWorker struct {
	clock  int64
	heard  time.Time
	active bool
}

func newSrvClocks(k int, timeout time.Duration) *srvClocks {
	return &srvClocks{k: int64(k), timeout: timeout, workers: make(map[int]*srvWorker), changed: make(chan struct{})}
}

// heardLocked marks w heard now, activating it if it was not active.
func (c *srvClocks) heardLocked(w int, now time.Time) *srvWorker {
	c.expireLocked(now)
	wk := c.workers[w]
	if wk == nil {
		wk = &srvWorker{}
		c.workers[w] = wk
	}
	if !wk.active {
		if low, ok := c.slowestLocked(); ok {
			wk.clock = max(wk.clock, low)
		}
		wk.active = true
	}
	wk.heard = now
	return wk
}

// expireLocked deactivates workers unheard for the timeout and returns
// when the next one would expire (zero if none is active).
func (c *srvClocks) expireLocked(now time.Time) time.Time {
	var next time.Time
	for _, wk := range c.workers {
		if !wk.active {
			continue
		}
		end := wk.heard.Add(c.timeout)
		if !now.Before(end) {
			wk.active = false
			continue
		}
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

func (c *srvClocks) slowestLocked() (int64, bool) {
	low, ok := int64(math.MaxInt64), false
	for _, wk := range c.workers {
		if wk.active {
			low, ok = min(low, wk.clock), true
		}
	}
	return low, ok
}

func (c *srvClocks) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// push advances worker w's clock (w < 0: not a worker).
func (c *srvClocks) push(w int) {
	if w < 0 || c.k == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heardLocked(w, time.Now()).clock++
	c.notifyLocked()
}

// drop stops counting worker w until it is heard from again.
func (c *srvClocks) drop(w int) {
	if w < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if wk := c.workers[w]; wk != nil && wk.active {
		wk.active = false
		c.notifyLocked()
	}
}

// await waits up to d until worker w's clock is within the bound of the
// slowest active worker's; false if it is not by then. onWait, if not
// nil, is called once when the wait begins.
func (c *srvClocks) await(w int, d time.Duration, stop <-chan struct{}, onWait func()) (bool, error) {
	if w < 0 || c.k == 0 {
		return true, nil
	}
	deadline := time.Now().Add(d)
	c.mu.Lock()
	c.heardLocked(w, time.Now())
	c.notifyLocked()
	c.mu.Unlock()
	waiting := false
	for {
		now := time.Now()
		c.mu.Lock()
		next := c.expireLocked(now)
		wk := c.workers[w]
		low, _ := c.slowestLocked()
		ok := !wk.active || wk.clock-low <= c.k
		changed := c.changed
		c.mu.Unlock()
		if ok {
			return true, nil
		}
		wake := deadline
		if !next.IsZero() && next.Before(wake) {
			wake = next
		}
		if !now.Before(deadline) {
			return false, nil
		}
		if !waiting && onWait != nil {
			onWait()
		}
		waiting = true
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-changed:
		case <-t.C:
		case <-stop:
			t.Stop()
			return false, ErrStopped
		}
		t.Stop()
	}
}

// srvDebugLogger routes gorpc's own error log to l at debug level: gorpc
// logs every timeout and broken connection, which callers see as errors.
func srvDebugLogger(l *slog.Logger) gorpc.LoggerFunc {
	return func(format string, args ...any) {
		l.Debug("ps: gorpc: " + fmt.Sprintf(format, args...))
	}
}
