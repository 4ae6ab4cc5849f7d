package ps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/kernels"
	"github.com/valyala/gorpc"
)

// DefaultCallTimeout is ClientConfig.CallTimeout when it is zero.
const DefaultCallTimeout = 30 * time.Second

// Back-off between connection attempts to a server: the first retry
// waits srvBackoffBase, each further failure doubles it up to
// srvBackoffMax, with ±20% jitter; attempts start at least srvMinRedial
// apart. After srvMaxAuthFailures handshakes that the server took part in
// fail in a row, DialServers gives up (a wrong secret).
const (
	srvBackoffBase     = 50 * time.Millisecond
	srvBackoffMax      = time.Second
	srvMinRedial       = 50 * time.Millisecond
	srvMaxAuthFailures = 3
)

// ClientConfig configures DialServers.
type ClientConfig struct {
	// Secret is the 32-byte job secret.
	Secret []byte
	// TLS must match the servers' ServerConfig.TLS.
	TLS bool
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
	// CallTimeout bounds one call to one server (a Pull's wait for the
	// staleness bound comes on top); zero means DefaultCallTimeout. A
	// server that does not answer within it fails the call with a
	// *ServerError.
	CallTimeout time.Duration
	// WorkerID is the worker's index, its clock for the staleness bound;
	// -1 on the chief (or any client that is no worker), which never
	// waits and is never waited for.
	WorkerID int
	// Wire is how this client's Pulls and Pushes carry values
	// (WireFloat64, the zero value, or WireFloat32: see Wire).
	Wire Wire

	noDataLink bool // tests: Pulls and Pushes over gorpc only
}

// Variable is one variable that Create places on the servers.
type Variable struct {
	Name  string
	Shape []int     // Shape[0] rows; row-major
	Value []float64 // initial value, len = product of Shape
}

// VarInfo describes one variable on the servers: its name, shape and
// shards, in Create's order.
type VarInfo struct {
	Name   string
	Shape  []int
	Shards []Shard
}

// Client talks to every parameter server of a job: one authenticated
// gorpc connection per server, reconnecting by itself. Its methods are
// safe for concurrent use; each sends one call per server, to all servers
// at once. Close releases it.
type Client struct {
	cfg     ClientConfig
	log     *slog.Logger
	servers []*srvConn

	life   context.Context // ends when Close starts
	cancel context.CancelFunc
	gate   lifecycle.Gate // call goroutines
	closed sync.Once

	mu     sync.Mutex
	layout *clientLayout // after Create or Attach

	counts clientCounts // for the task's metrics (metrics.go)
}

// clientLayout is the layout a client learned, indexed for Pull and Push.
type clientLayout struct {
	wire  srvLayoutWire
	opt   Optimizer
	vars  []VarInfo
	elems []int          // of each variable
	refs  [][]clientRef  // each server's shards, in layout order
	bytes []int          // of each server's values
	names map[string]int // variable index by name
}

// clientRef is one shard in a server's values: elements [off, off+n) of
// variable v.
type clientRef struct{ v, off, n int }

// srvConn is a client's connection to one server.
type srvConn struct {
	index int
	addr  string
	c     *Client
	guard *auth.Guard
	rpc   *gorpc.Client
	dc    *gorpc.DispatcherClient
	done  chan struct{} // closed when the owner goroutine is gone
	conns lifecycle.Conns
	link  srvLink

	// data is the data link that carries Pulls and Pushes (see data.go).
	data dataLink

	// push is the buffer of this server's share of a Push, kept for the
	// next one once a Push has been answered (so gorpc has sent it);
	// a failed Push drops it, since gorpc may still hold it.
	pushMu sync.Mutex
	push   []byte
}

// DialServers connects to the servers at addrs (server i at addrs[i])
// and authenticates with the job secret. It returns once every server
// accepted a connection; a server that cannot be reached before ctx ends,
// or that rejects the handshake repeatedly (a wrong secret), fails it
// with a *ServerError.
func DialServers(ctx context.Context, addrs []string, cfg ClientConfig) (*Client, error) {
	switch {
	case len(addrs) == 0:
		return nil, fmt.Errorf("%w: no server addresses", ErrConfig)
	case len(cfg.Secret) != auth.SecretSize:
		return nil, fmt.Errorf("%w: secret is %d bytes, want %d", ErrConfig, len(cfg.Secret), auth.SecretSize)
	case cfg.CallTimeout < 0:
		return nil, fmt.Errorf("%w: negative call timeout %s", ErrConfig, cfg.CallTimeout)
	case cfg.WorkerID < -1 || cfg.WorkerID >= srvMaxWorkerID:
		return nil, fmt.Errorf("%w: worker id %d out of range [-1, %d)", ErrConfig, cfg.WorkerID, srvMaxWorkerID)
	case !cfg.Wire.valid():
		return nil, fmt.Errorf("%w: unknown wire type %d", ErrConfig, int(cfg.Wire))
	}
	for i, a := range addrs {
		if a == "" {
			return nil, fmt.Errorf("%w: server %d has an empty address", ErrConfig, i)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	cfg.Secret = slices.Clone(cfg.Secret)
	c := &Client{cfg: cfg, log: cfg.Logger}
	c.life, c.cancel = context.WithCancel(context.Background())
	for i, a := range addrs {
		guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		sc := &srvConn{index: i, addr: a, c: c, guard: guard, done: make(chan struct{}), link: newSrvLink()}
		sc.rpc = &gorpc.Client{
			Addr:               a,
			Conns:              1,
			DisableCompression: true,
			FlushDelay:         -1,
			PendingRequests:    srvRPCPending,
			SendBufferSize:     srvRPCBuffer,
			RecvBufferSize:     srvRPCBuffer,
			RequestTimeout:     cfg.CallTimeout,
			OnConnect:          sc.onConnect,
			Dial:               sc.dial,
			LogError:           srvDebugLogger(c.log),
		}
		sc.dc = srvClientDispatcher.NewServiceClient(srvServiceName, sc.rpc)
		c.servers = append(c.servers, sc)
		go sc.own()
	}
	if err := c.each(ctx, func(ctx context.Context, sc *srvConn) error { return sc.awaitLink(ctx) }); err != nil {
		c.Close()
		return nil, err
	}
	if !cfg.noDataLink {
		c.each(ctx, func(ctx context.Context, sc *srvConn) error {
			sc.setupData(ctx)
			return nil
		})
	}
	return c, nil
}

// own is a connection's owner goroutine: the only one that calls gorpc's
// Start and Stop. It runs until Close.
func (sc *srvConn) own() {
	defer close(sc.done)
	sc.rpc.Start()
	<-sc.c.life.Done()
	sc.conns.CloseAll() // unblocks a handshake in progress
	sc.rpc.Stop()
}

func (sc *srvConn) fail(err error) error {
	return &ServerError{Index: sc.index, Addr: sc.addr, Err: err}
}

// awaitLink waits for the first authenticated connection.
func (sc *srvConn) awaitLink(ctx context.Context) error {
	for {
		ready, authFails, lastErr, changed := sc.link.state()
		switch {
		case ready:
			return nil
		case authFails >= srvMaxAuthFailures:
			return sc.fail(fmt.Errorf("%w: %d handshakes rejected (wrong job secret?): %w", ErrAuth, authFails, lastErr))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return sc.fail(fmt.Errorf("%w: cannot connect: %w (last error: %v)", ErrUnreachable, ctx.Err(), lastErr))
		case <-sc.c.life.Done():
			return ErrClosed
		}
	}
}

// onConnect is the client's gorpc OnConnect hook: the dialing side of the
// handshake, then the bound on the server's messages.
func (sc *srvConn) onConnect(_ string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", ErrAuth, rwc)
	}
	heard := &srvHeardConn{Conn: conn}
	stream, hello, err := sc.guard.Client(heard, []byte(srvHelloClient), time.Now().Add(srvHandshakeTimeout))
	if err == nil && string(hello) != srvHelloServer {
		err = fmt.Errorf("%w: peer speaks %q, not the parameter-server protocol", auth.ErrAuth, hello)
	}
	if err != nil {
		err = fmt.Errorf("%w: handshake: %w", ErrAuth, err)
		if sc.c.life.Err() == nil {
			sc.c.log.Warn("ps: handshake with parameter server failed", "server", sc.index, "addr", sc.addr, "err", err)
			// A server that closed without a word has not judged the
			// secret: only a handshake it took part in counts.
			sc.link.failed(err, heard.heard)
		}
		return nil, err
	}
	sc.link.connected()
	if stream == net.Conn(heard) {
		stream = conn // in clear: no need to watch reads any more
	}
	return newSrvFrameConn(stream, srvMaxMessage, false), nil
}

// srvHeardConn notes whether the other end sent a byte.
type srvHeardConn struct {
	net.Conn
	heard bool
}

func (h *srvHeardConn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 {
		h.heard = true
	}
	return n, err
}

// dial is the gorpc Dial function: it retries refused connections with
// back-off until it has one or the client closes. Connections are
// tracked so Close can close one that races it.
func (sc *srvConn) dial(addr string) (io.ReadWriteCloser, error) {
	for {
		if err := sc.link.pace(sc.c.life); err != nil {
			return nil, err
		}
		d := net.Dialer{Timeout: srvHandshakeTimeout, KeepAlive: 15 * time.Second}
		conn, err := d.DialContext(sc.c.life, "tcp", addr)
		if err != nil {
			if sc.c.life.Err() != nil {
				return nil, ErrClosed
			}
			sc.link.failed(fmt.Errorf("%w: dial: %w", ErrUnreachable, err), false)
			continue
		}
		tc := &srvTrackedConn{Conn: conn, set: &sc.conns}
		if !sc.conns.Add(tc) {
			return nil, ErrClosed
		}
		return tc, nil
	}
}

// srvTrackedConn leaves its set when gorpc closes it.
type srvTrackedConn struct {
	net.Conn
	set *lifecycle.Conns
}

func (t *srvTrackedConn) Close() error {
	t.set.Remove(t)
	return t.Conn.Close()
}

// call makes one call to server sc, bounded by timeout, ctx and Close.
// The gorpc call runs in a goroutine admitted by the client's gate, so ctx
// and Close interrupt the caller at once; the goroutine ends within
// timeout. Failures to reach the server are *ServerErrors; errors the
// server answers wrap their sentinel and name the server; ctx's errors
// come back as they are.
func (c *Client) call(ctx context.Context, sc *srvConn, method string, req any, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.gate.Enter() {
		return nil, ErrClosed
	}
	type result struct {
		resp any
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		defer c.gate.Leave()
		resp, err := sc.dc.CallTimeout(method, req, timeout)
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		if r.err == nil {
			return r.resp, nil
		}
		return nil, sc.mapErr(method, r.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.life.Done():
		return nil, ErrClosed
	}
}

func (sc *srvConn) mapErr(method string, err error) error {
	if sc.c.life.Err() != nil {
		return ErrClosed
	}
	var ce *gorpc.ClientError
	if errors.As(err, &ce) && ce.Server {
		remote := srvDecodeRemote(ce.Error())
		if errors.Is(remote, ErrStopped) {
			return sc.fail(remote)
		}
		return fmt.Errorf("ps: %s: parameter server %d (%s) refused: %w", method, sc.index, sc.addr, remote)
	}
	if last := sc.link.lastError(); last != nil {
		return sc.fail(fmt.Errorf("%w: %s: %v (last connection error: %v)", ErrUnreachable, method, err, last))
	}
	return sc.fail(fmt.Errorf("%w: %s: %v", ErrUnreachable, method, err))
}

// each runs f for every server at once and returns the first error to
// occur (the others' calls are cancelled then).
func (c *Client) each(ctx context.Context, f func(ctx context.Context, sc *srvConn) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, sc := range c.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, sc); err != nil {
				once.Do(func() {
					first = err
					cancel()
				})
			}
		}()
	}
	wg.Wait()
	return first
}

// lay is the layout learned by Create or Attach.
func (c *Client) lay() (*clientLayout, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.layout == nil {
		return nil, fmt.Errorf("%w: call Create or Attach first", ErrNotCreated)
	}
	return c.layout, nil
}

// Create places vars on the servers with p (Place over their shapes, as
// float64) and sends each server the layout, the optimizer and the
// initial values of its shards (chief). Creating again with the same
// variables' layout and optimizer succeeds and leaves the servers' values
// as they are; a different layout or optimizer fails with ErrLayout.
func (c *Client) Create(ctx context.Context, vars []Variable, p Partitioner, opt Optimizer) error {
	if len(vars) == 0 {
		return fmt.Errorf("%w: Create: no variables", ErrBadRequest)
	}
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return fmt.Errorf("%w: Create: %w", ErrBadRequest, err)
	}
	specs := make([]VarSpec, len(vars))
	for i, v := range vars {
		specs[i] = VarSpec{Name: v.Name, Shape: v.Shape, DType: kernels.F64}
	}
	pl, err := Place(specs, len(c.servers), p)
	if err != nil {
		return fmt.Errorf("%w: Create: %w", ErrBadRequest, err)
	}
	wl := srvLayoutWire{Servers: len(c.servers), Vars: make([]srvVarWire, len(pl.Vars))}
	for i, v := range pl.Vars {
		wv := srvVarWire{Name: v.Name, Shape: slices.Clone(v.Shape)}
		for _, sh := range v.Shards {
			wv.Shards = append(wv.Shards, srvShardWire{Start: sh.Rows.Start, End: sh.Rows.End, Server: sh.Server})
		}
		wl.Vars[i] = wv
	}
	l, err := newClientLayout(wl, opt)
	if err != nil {
		return fmt.Errorf("%w: Create: %w", ErrBadRequest, err)
	}
	values := make([][]float64, len(vars))
	for i, v := range vars {
		if len(v.Value) != l.elems[i] {
			return fmt.Errorf("%w: Create: variable %q of shape %v has %d values, want %d", ErrBadRequest, v.Name, v.Shape, len(v.Value), l.elems[i])
		}
		values[i] = v.Value
	}
	err = c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		req := &srvCreateReq{Index: sc.index, Layout: wl, Opt: opt, Values: l.gather(nil, sc.index, values, WireFloat64)}
		_, err := c.call(ctx, sc, "Create", req, c.cfg.CallTimeout)
		return err
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.layout = l
	c.mu.Unlock()
	return nil
}

// Attach learns the layout from the servers, waiting (bounded by ctx)
// until Create has run on every one of them. Servers that disagree on the
// layout or optimizer fail it with ErrLayout.
func (c *Client) Attach(ctx context.Context) error {
	got := make([]*srvLayoutResp, len(c.servers))
	err := c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		for {
			wait := srvPollWait
			if dl, ok := ctx.Deadline(); ok {
				wait = max(min(wait, time.Until(dl)), 0)
			}
			resp, err := c.call(ctx, sc, "Layout", &srvLayoutReq{Wait: wait}, wait+c.cfg.CallTimeout)
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%w: Attach: parameter server %d (%s): %w", ErrNotCreated, sc.index, sc.addr, ctx.Err())
			}
			if err != nil {
				return err
			}
			r, ok := resp.(*srvLayoutResp)
			switch {
			case !ok:
				return sc.protocol("Layout", resp)
			case r.Index != sc.index:
				return fmt.Errorf("%w: Attach: the server at %s is server %d, not %d (address lists differ?)", ErrLayout, sc.addr, r.Index, sc.index)
			case r.Ready:
				got[sc.index] = r
				return nil
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%w: Attach: parameter server %d (%s): %w", ErrNotCreated, sc.index, sc.addr, err)
			}
		}
	})
	if err != nil {
		return err
	}
	for i, r := range got[1:] {
		if r.Opt != got[0].Opt || !srvLayoutsEqual(r.Layout, got[0].Layout) {
			return fmt.Errorf("%w: Attach: servers 0 and %d hold different layouts or optimizers", ErrLayout, i+1)
		}
	}
	if got[0].Layout.Servers != len(c.servers) {
		return fmt.Errorf("%w: Attach: the layout is for %d servers, the client knows %d", ErrLayout, got[0].Layout.Servers, len(c.servers))
	}
	l, err := newClientLayout(got[0].Layout, got[0].Opt)
	if err != nil {
		return fmt.Errorf("%w: Attach: %w", ErrProtocol, err)
	}
	c.mu.Lock()
	c.layout = l
	c.mu.Unlock()
	return nil
}

func (sc *srvConn) protocol(method string, resp any) error {
	return fmt.Errorf("%w: %s: parameter server %d (%s) answered %T", ErrProtocol, method, sc.index, sc.addr, resp)
}

// Variables lists the variables (name, shape and shards) in Create's
// order; nil before Create or Attach.
func (c *Client) Variables() []VarInfo {
	l, err := c.lay()
	if err != nil {
		return nil
	}
	out := make([]VarInfo, len(l.vars))
	for i, v := range l.vars {
		out[i] = VarInfo{Name: v.Name, Shape: slices.Clone(v.Shape), Shards: slices.Clone(v.Shards)}
	}
	return out
}

// Optimizer is the optimizer the servers apply (defaults filled in);
// the zero Optimizer before Create or Attach.
func (c *Client) Optimizer() Optimizer {
	l, err := c.lay()
	if err != nil {
		return Optimizer{}
	}
	return l.opt
}

// Pull reads every variable into dst[name] (dst must not be nil; a
// slice shorter than the variable is replaced by a new one, a longer one
// is cut to the variable's length). It returns the global step: the
// smallest of the servers' push counts, that is the number of pushes that
// every server has applied (the number of pushes made, when none is in
// flight; Load sets it). With a staleness bound, a worker's Pull first
// waits, bounded by ctx, until its clock is within the bound.
func (c *Client) Pull(ctx context.Context, dst map[string][]float64) (int64, error) {
	l, err := c.lay()
	if err != nil {
		return 0, err
	}
	if dst == nil {
		return 0, fmt.Errorf("%w: Pull: nil map", ErrBadRequest)
	}
	out := make([][]float64, len(l.vars))
	for i, v := range l.vars {
		d := dst[v.Name]
		if len(d) < l.elems[i] {
			d = make([]float64, l.elems[i])
		}
		out[i] = d[:l.elems[i]]
		dst[v.Name] = out[i]
	}
	steps := make([]int64, len(c.servers))
	err = c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		for {
			step, ready, err := c.dataPull(ctx, sc, l, out)
			if errors.Is(err, errNoLink) {
				break
			}
			if err != nil {
				return err
			}
			if ready {
				steps[sc.index] = step
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		for {
			wait := srvPollWait
			if dl, ok := ctx.Deadline(); ok {
				wait = max(min(wait, time.Until(dl)), 0)
			}
			req := &srvPullReq{Worker: c.cfg.WorkerID, Wait: wait, Wire: c.cfg.Wire}
			resp, err := c.call(ctx, sc, "Pull", req, wait+c.cfg.CallTimeout)
			if err != nil {
				return err
			}
			r, ok := resp.(*srvPullResp)
			if !ok {
				return sc.protocol("Pull", resp)
			}
			if !r.Ready {
				if err := ctx.Err(); err != nil {
					return err
				}
				continue
			}
			size := c.cfg.Wire.size()
			if want := l.bytes[sc.index] / 8 * size; len(r.Values) != want {
				return fmt.Errorf("%w: Pull: parameter server %d (%s) answered %d bytes, want %d", ErrProtocol, sc.index, sc.addr, len(r.Values), want)
			}
			off := 0
			for _, ref := range l.refs[sc.index] {
				readValues(out[ref.v][ref.off:ref.off+ref.n], r.Values[off:], c.cfg.Wire)
				off += size * ref.n
			}
			steps[sc.index] = r.Step
			return nil
		}
	})
	if err != nil {
		return 0, err
	}
	global := slices.Min(steps)
	c.counts.pulled(global)
	return global, nil
}

// Push sends one gradient per variable (grads[name], of the variable's
// length; a missing or unknown name is an error and nothing is sent).
// Each server applies its shards' part with the optimizer, under each
// shard's lock, and counts the push. If a server fails, the others may
// have applied the gradient already.
func (c *Client) Push(ctx context.Context, grads map[string][]float64) error {
	l, err := c.lay()
	if err != nil {
		return err
	}
	in, err := l.inputs("Push", grads)
	if err != nil {
		return err
	}
	err = c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		if err := c.dataPush(ctx, sc, l, in); !errors.Is(err, errNoLink) {
			return err
		}
		sc.pushMu.Lock()
		buf := sc.push
		sc.push = nil
		sc.pushMu.Unlock()
		buf = l.gather(buf[:0], sc.index, in, c.cfg.Wire)
		_, err := c.call(ctx, sc, "Push", &srvPushReq{Worker: c.cfg.WorkerID, Wire: c.cfg.Wire, Grads: buf}, c.cfg.CallTimeout)
		if err == nil {
			sc.pushMu.Lock()
			sc.push = buf
			sc.pushMu.Unlock()
		}
		return err
	})
	if err == nil {
		c.counts.pushes.Add(1)
	}
	return err
}

// Load overwrites every variable's values and the servers' step (chief,
// restoring a checkpoint): values must hold every variable at its length.
// The optimizer's slots are zeroed (Adam's bias correction starts again).
func (c *Client) Load(ctx context.Context, values map[string][]float64, step int64) error {
	l, err := c.lay()
	if err != nil {
		return err
	}
	if step < 0 {
		return fmt.Errorf("%w: Load: negative step %d", ErrBadRequest, step)
	}
	in, err := l.inputs("Load", values)
	if err != nil {
		return err
	}
	return c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		_, err := c.call(ctx, sc, "Load", &srvLoadReq{Values: l.gather(nil, sc.index, in, WireFloat64), Step: step}, c.cfg.CallTimeout)
		return err
	})
}

// Drop tells every server to stop counting worker workerID for the
// staleness bound (the chief, on losing a worker); the worker counts again
// once it pulls or pushes.
func (c *Client) Drop(ctx context.Context, workerID int) error {
	if workerID < 0 || workerID >= srvMaxWorkerID {
		return fmt.Errorf("%w: Drop: worker id %d out of range [0, %d)", ErrBadRequest, workerID, srvMaxWorkerID)
	}
	return c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		_, err := c.call(ctx, sc, "Drop", &srvWorkerReq{Worker: workerID}, c.cfg.CallTimeout)
		return err
	})
}

// Shutdown asks every server to end: their Done channels close and their
// Serve returns.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		_, err := c.call(ctx, sc, "Shutdown", nil, c.cfg.CallTimeout)
		return err
	})
}

// Ping checks that every server answers; the error names the first that
// did not.
func (c *Client) Ping(ctx context.Context) error {
	return c.each(ctx, func(ctx context.Context, sc *srvConn) error {
		_, err := c.call(ctx, sc, "Ping", nil, c.cfg.CallTimeout)
		return err
	})
}

// Close stops the client's connections and goroutines and waits for them;
// calls in progress return ErrClosed at once. Close itself may wait up to
// one call timeout for a call queued while a server was out of reach. It
// is idempotent.
func (c *Client) Close() error {
	c.closed.Do(func() {
		c.gate.Shut()
		c.cancel()
		for _, sc := range c.servers {
			<-sc.done
			sc.closeData()
		}
		c.gate.Wait()
	})
	return nil
}

// String names the client by its servers' addresses; it never shows the
// secret.
func (c *Client) String() string {
	addrs := make([]string, len(c.servers))
	for i, sc := range c.servers {
		addrs[i] = sc.addr
	}
	return fmt.Sprintf("ps.Client(%v)", addrs)
}

// newClientLayout checks a layout and indexes it.
func newClientLayout(wl srvLayoutWire, opt Optimizer) (*clientLayout, error) {
	l := &clientLayout{
		wire:  wl,
		opt:   opt,
		vars:  make([]VarInfo, len(wl.Vars)),
		elems: make([]int, len(wl.Vars)),
		refs:  make([][]clientRef, wl.Servers),
		bytes: make([]int, wl.Servers),
		names: make(map[string]int, len(wl.Vars)),
	}
	for s := range wl.Servers {
		if _, err := srvCheckLayout(&wl, s); err != nil {
			return nil, err
		}
	}
	for i, v := range wl.Vars {
		rowElems := 1
		for _, d := range v.Shape[1:] {
			rowElems *= d
		}
		l.elems[i] = v.Shape[0] * rowElems
		l.names[v.Name] = i
		info := VarInfo{Name: v.Name, Shape: slices.Clone(v.Shape)}
		for _, sh := range v.Shards {
			n := (sh.End - sh.Start) * rowElems
			info.Shards = append(info.Shards, Shard{Rows: RowRange{sh.Start, sh.End}, Server: sh.Server, Bytes: 8 * int64(n)})
			l.refs[sh.Server] = append(l.refs[sh.Server], clientRef{v: i, off: sh.Start * rowElems, n: n})
			l.bytes[sh.Server] += 8 * n
		}
		l.vars[i] = info
	}
	return l, nil
}

// inputs checks a map of one slice per variable and returns them in
// layout order.
func (l *clientLayout) inputs(op string, m map[string][]float64) ([][]float64, error) {
	for name := range m {
		if _, ok := l.names[name]; !ok {
			return nil, fmt.Errorf("%w: %s: unknown variable %q", ErrBadRequest, op, name)
		}
	}
	out := make([][]float64, len(l.vars))
	for i, v := range l.vars {
		x, ok := m[v.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s: variable %q missing", ErrBadRequest, op, v.Name)
		case len(x) != l.elems[i]:
			return nil, fmt.Errorf("%w: %s: variable %q has %d values, want %d", ErrBadRequest, op, v.Name, len(x), l.elems[i])
		}
		out[i] = x
	}
	return out, nil
}

// gather appends server s's shards of vals (one slice per variable, in
// layout order) to b as w's values.
func (l *clientLayout) gather(b []byte, s int, vals [][]float64, w Wire) []byte {
	if n := l.bytes[s] / 8 * w.size(); cap(b) < n {
		b = make([]byte, 0, n)
	}
	for _, r := range l.refs[s] {
		b = appendValues(b, vals[r.v][r.off:r.off+r.n], w)
	}
	return b
}

// srvLink is a connection's state: whether a handshake ever succeeded,
// consecutive failures (for back-off and DialServers' verdict) and the
// last connection error (quoted in call errors).
type srvLink struct {
	mu        sync.Mutex
	ready     bool
	fails     int
	authFails int
	lastErr   error
	last      time.Time // start of the latest attempt
	changed   chan struct{}
}

func newSrvLink() srvLink { return srvLink{changed: make(chan struct{})} }

func (l *srvLink) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *srvLink) connected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ready, l.fails, l.authFails, l.lastErr = true, 0, 0, nil
	l.notifyLocked()
}

func (l *srvLink) failed(err error, handshake bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails++
	if handshake {
		l.authFails++
	}
	l.lastErr = err
	l.notifyLocked()
}

func (l *srvLink) state() (ready bool, authFails int, lastErr error, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready, l.authFails, l.lastErr, l.changed
}

func (l *srvLink) lastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// pace sleeps before the next connection attempt as the back-off asks;
// it returns ErrClosed early when ctx ends.
func (l *srvLink) pace(ctx context.Context) error {
	l.mu.Lock()
	wait := time.Duration(0)
	if l.fails > 0 {
		d := min(srvBackoffBase<<min(l.fails-1, 8), srvBackoffMax)
		wait = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	}
	wait = max(wait, time.Until(l.last.Add(srvMinRedial)))
	l.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ErrClosed
		}
	}
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
	return nil
}
