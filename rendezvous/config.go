package rendezvous

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
)

// DefaultHandshakeTimeout bounds the authentication handshake of one
// connection when no timeout is configured.
const DefaultHandshakeTimeout = 5 * time.Second

// ServerConfig configures a rendezvous Server.
//
// Its String, GoString and LogValue methods leave the secret out, so a
// config may be printed or logged.
type ServerConfig struct {
	// Addr is the TCP address to listen on, "127.0.0.1:0" style; port 0
	// picks a free port (read it back with Server.Addr).
	Addr string
	// Secret is the 32-byte job secret (auth.SecretSize).
	Secret []byte
	// Size is the number of ranks that must register.
	Size int
	// Hosts, if not nil, holds the planned host of each rank (len Size);
	// it names the hosts of missing ranks in error messages.
	Hosts []string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// HandshakeTimeout bounds each connection's authentication;
	// zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// SingleRound serves one registration round only, for a server that
	// lives until its own rank's mesh is formed (rank 0's, in a job gorun
	// did not start): once the table is complete, a registration with a
	// new address fails with ErrStopped, and the client retries until the
	// next server listens at the same address.
	SingleRound bool
	// TLS runs every connection inside TLS 1.3 keyed from Secret (see
	// auth.Guard); clients must dial WithTLS(true). A client of the other
	// kind fails its handshake with an error naming the mismatch.
	TLS bool
	// OnMetrics, if not nil, receives the points that ranks send with
	// Client.PushMetrics (rank as the client says), on the server's
	// handler goroutines, concurrently: it must be quick, and must not
	// keep the slice past the call (the server reuses it for the next
	// batch; the points themselves may be copied and kept). Without it
	// PushMetrics fails with ErrNoMetrics.
	OnMetrics func(rank int, points []MetricPoint)
}

// validate checks every invariant and reports the first violated one.
func (c *ServerConfig) validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: empty listen address", ErrConfig)
	case len(c.Secret) != auth.SecretSize:
		return fmt.Errorf("%w: secret is %d bytes, want %d", ErrConfig, len(c.Secret), auth.SecretSize)
	case c.Size < 1:
		return fmt.Errorf("%w: size %d, want at least 1", ErrConfig, c.Size)
	case c.Hosts != nil && len(c.Hosts) != c.Size:
		return fmt.Errorf("%w: %d hosts for %d ranks", ErrConfig, len(c.Hosts), c.Size)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("%w: negative handshake timeout %s", ErrConfig, c.HandshakeTimeout)
	}
	return nil
}

// withDefaults returns a copy with zero fields filled in and slices copied.
func (c ServerConfig) withDefaults() ServerConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	c.Secret = append([]byte(nil), c.Secret...)
	c.Hosts = append([]string(nil), c.Hosts...)
	return c
}

// String describes the config without the secret.
func (c ServerConfig) String() string {
	return fmt.Sprintf("rendezvous.ServerConfig{Addr:%q Size:%d Hosts:%q Secret:[redacted] HandshakeTimeout:%s SingleRound:%t TLS:%t}",
		c.Addr, c.Size, c.Hosts, c.HandshakeTimeout, c.SingleRound, c.TLS)
}

// GoString is String, so %#v does not print the secret either.
func (c ServerConfig) GoString() string { return c.String() }

// LogValue lets slog log a config without its secret.
func (c ServerConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.Int("size", c.Size),
		slog.Any("hosts", c.Hosts),
		slog.Duration("handshake_timeout", c.HandshakeTimeout),
		slog.Bool("single_round", c.SingleRound),
		slog.Bool("tls", c.TLS),
	)
}
