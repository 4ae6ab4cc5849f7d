package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// DefaultCallTimeout bounds one attempt of a short call (Register, Set,
// Missing, Ping) when no WithCallTimeout option is given.
const DefaultCallTimeout = time.Second

// Client is a rank's connection to the rendezvous server. Its methods are
// safe for concurrent use. Close releases it.
type Client struct {
	addr  string
	guard *auth.Guard // the handshake, plain or TLS (WithTLS)
	opts  options
	log   *slog.Logger
	rpc   *gorpc.Client
	dc    *gorpc.DispatcherClient

	life   context.Context // ends when Close starts
	cancel context.CancelFunc
	done   chan struct{} // closed when the owner goroutine is gone
	link   *link
	conns  lifecycle.Conns
	gate   lifecycle.Gate // call and Watch goroutines
	closed sync.Once

	mu  sync.Mutex
	reg *registerReq // the latest successful Register, until Leave
}

// Option configures Dial.
type Option func(*options)

type options struct {
	logger           *slog.Logger
	handshakeTimeout time.Duration
	callTimeout      time.Duration
	maxAuthFailures  int
	tls              bool
}

// WithLogger sends the client's logs to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithHandshakeTimeout bounds connecting plus the authentication handshake
// (default DefaultHandshakeTimeout).
func WithHandshakeTimeout(d time.Duration) Option {
	return func(o *options) { o.handshakeTimeout = d }
}

// WithCallTimeout bounds one attempt of a short call (default
// DefaultCallTimeout); blocking calls add it to their server-side wait.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithTLS runs every connection to the server inside TLS 1.3 keyed from
// the job secret (see auth.Guard), when on is true; the server must have
// ServerConfig.TLS set the same way, or the handshake fails with an error
// naming the mismatch.
func WithTLS(on bool) Option { return func(o *options) { o.tls = on } }

// WithMaxAuthFailures sets after how many consecutive failed handshakes
// Dial gives up (default 3). A handshake counts once the server has sent a
// byte: a server that closes a connection at once, refusing it (too many
// handshakes at a time), leaves Dial retrying until its context ends.
func WithMaxAuthFailures(n int) Option { return func(o *options) { o.maxAuthFailures = n } }

func buildOptions(opts []Option) (options, error) {
	o := options{
		logger:           slog.New(slog.DiscardHandler),
		handshakeTimeout: DefaultHandshakeTimeout,
		callTimeout:      DefaultCallTimeout,
		maxAuthFailures:  3,
	}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case o.logger == nil:
		return o, fmt.Errorf("%w: nil logger", ErrConfig)
	case o.handshakeTimeout <= 0 || o.callTimeout <= 0:
		return o, fmt.Errorf("%w: timeouts must be positive", ErrConfig)
	case o.maxAuthFailures < 1:
		return o, fmt.Errorf("%w: max auth failures %d, want at least 1", ErrConfig, o.maxAuthFailures)
	}
	return o, nil
}

// Dial connects to the rendezvous server at addr and authenticates with
// the 32-byte job secret. It returns once a connection is authenticated;
// it fails when ctx ends first (ErrUnreachable) or when the server rejects
// the handshake repeatedly (ErrAuth: usually a wrong secret). Refused
// connections and failed handshakes are retried with back-off, never in a
// tight loop. After Dial, the client reconnects by itself.
func Dial(ctx context.Context, addr string, secret []byte, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, fmt.Errorf("%w: empty server address", ErrConfig)
	}
	if len(secret) != auth.SecretSize {
		return nil, fmt.Errorf("%w: secret is %d bytes, want %d", ErrConfig, len(secret), auth.SecretSize)
	}
	guard, err := auth.NewGuard(secret, o.tls)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := newClient(addr, guard, o)
	go c.own()
	if err := c.awaitLink(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(addr string, guard *auth.Guard, o options) *Client {
	c := &Client{
		addr:  addr,
		guard: guard,
		opts:  o,
		log:   o.logger,
		done:  make(chan struct{}),
		link:  newLink(),
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	c.rpc = &gorpc.Client{
		Addr:               addr,
		Conns:              1,
		DisableCompression: true,
		FlushDelay:         -1, // send at once: control calls are latency-bound
		PendingRequests:    rpcPending,
		SendBufferSize:     rpcBuffer,
		RecvBufferSize:     rpcBuffer,
		RequestTimeout:     o.callTimeout,
		OnConnect:          c.onConnect,
		Dial:               c.dial,
		LogError:           debugLogger(c.log),
	}
	c.dc = newDispatcher(nil).NewServiceClient(serviceName, c.rpc)
	return c
}

// own is the owner goroutine ("rendezvous-client"): the only goroutine
// that calls gorpc's Start and Stop. It runs until Close.
func (c *Client) own() {
	defer close(c.done)
	c.rpc.Start()
	<-c.life.Done()
	c.conns.CloseAll() // unblocks a handshake in progress
	c.rpc.Stop()
}

// awaitLink waits for the first authenticated connection.
func (c *Client) awaitLink(ctx context.Context) error {
	for {
		ready, authFails, lastErr, changed := c.link.state()
		switch {
		case ready:
			return nil
		case authFails >= c.opts.maxAuthFailures && errors.Is(lastErr, auth.ErrMismatch):
			return fmt.Errorf("%w: %s: %w", ErrAuth, c.addr, lastErr)
		case authFails >= c.opts.maxAuthFailures:
			return fmt.Errorf("%w: %s rejected %d handshakes (wrong job secret?): %w",
				ErrAuth, c.addr, authFails, lastErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: cannot connect to %s: %w (last error: %w)",
				ErrUnreachable, c.addr, ctx.Err(), lastErr)
		}
	}
}

// Close stops the client's goroutines and connections and waits for them.
// A blocked call returns ErrClosed at once; Close itself may wait up to one
// call timeout for a request queued while disconnected. It is idempotent.
func (c *Client) Close() error {
	c.closed.Do(func() {
		c.gate.Shut()
		c.cancel()
		<-c.done
		c.gate.Wait()
	})
	return nil
}

// Addr is the server address the client dials.
func (c *Client) Addr() string { return c.addr }

// String names the client by its server address; it never shows the
// secret.
func (c *Client) String() string { return "rendezvous.Client(" + c.addr + ")" }

// GoString is String, so %#v does not print the secret either.
func (c *Client) GoString() string { return c.String() }
