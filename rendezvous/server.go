package rendezvous

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// Server is the rendezvous service that the launcher runs: ranks register
// their data-plane addresses with it and read back the full peer table.
//
// NewServer, then Start; Stop ends it. One owner goroutine, created by
// Start, calls gorpc's Start and Stop, as gorpc requires.
type Server struct {
	cfg   ServerConfig
	guard *auth.Guard // the handshake, plain or TLS
	log   *slog.Logger
	board *board
	rpc   *gorpc.Server

	handlers   lifecycle.Gate  // running service calls
	handshakes lifecycle.Conns // connections inside the auth handshake
	// maxHandshakes bounds handshakes (see onConnect), refusing records
	// that one was refused since the last admitted.
	maxHandshakes int
	refusing      atomic.Bool
	stopping      chan struct{} // closed by Stop: wakes blocked calls
	done          chan struct{} // closed when the owner goroutine is gone
	calls         atomic.Int64  // service calls admitted (for tests)

	mu      sync.Mutex
	spawned bool // Start ran the owner goroutine (which closes done)
	addr    string
	stop    sync.Once
}

// NewServer validates cfg and prepares a server; it does not listen yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Server{
		cfg:      cfg,
		guard:    guard,
		log:      cfg.Logger,
		board:    newBoard(cfg.Size, cfg.Hosts, cfg.SingleRound),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),

		maxHandshakes: maxHandshakes(cfg.Size),
	}
	s.rpc = &gorpc.Server{
		Addr:             cfg.Addr,
		Handler:          newDispatcher(&service{s: s}).NewHandlerFunc(),
		OnConnect:        s.onConnect,
		LogError:         debugLogger(s.log),
		PendingResponses: rpcPending,
		SendBufferSize:   rpcBuffer,
		RecvBufferSize:   rpcBuffer,
	}
	return s, nil
}

// maxHandshakes is how many connections a server of size ranks
// authenticates at once: every rank at the same moment, twice over (a rank
// reconnecting while its old connection still times out), and 256 more.
// An intruder's silent connections thus cost the launcher a bounded number
// of sockets, each for at most HandshakeTimeout.
func maxHandshakes(size int) int { return 2*size + 256 }

// rpcPending and rpcBuffer size each gorpc connection's queue of calls in
// flight and its read and write buffers, at both ends. A rank has a few
// calls in flight at most (a long poll, a heartbeat, a key-value call), and
// its messages are small (the largest, a peer table, is about 50 bytes a
// rank, and bigger ones still pass, through more reads). gorpc's defaults
// (32,768 calls and 64 KiB buffers) cost about 850 KB a connection: 0.9 GB
// at the server of a 1,024-rank job; with these, BenchmarkScaleRendezvous
// measured 61-110 KB a connection, both ends counted.
const (
	rpcPending = 64
	rpcBuffer  = 4 << 10
)

// Start listens on the configured address and serves in the background.
// It returns an error if listening fails or the server was started or
// stopped before; a server whose Start failed cannot be started again.
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
	s.spawned = true
	errc := make(chan error, 1)
	go s.own(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("%w: listen on %s: %w", ErrConfig, s.cfg.Addr, err)
	}
	s.log.Info("rendezvous: listening", "addr", s.addr, "size", s.cfg.Size)
	return nil
}

// own is the owner goroutine ("rendezvous-server"): the only goroutine that
// calls gorpc's Start and Stop. It reports Start's outcome on errc, then
// waits for Stop.
func (s *Server) own(errc chan<- error) {
	defer close(s.done)
	if err := s.rpc.Start(); err != nil {
		errc <- err
		return
	}
	s.addr = s.rpc.Listener.ListenAddr().String()
	errc <- nil
	<-s.stopping
	s.handshakes.CloseAll()
	s.rpc.Stop()
	s.handlers.Wait()
}

// Addr is the address the server listens on, with the real port; empty
// before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop wakes blocked calls, closes every connection and returns when the
// server's goroutines are gone. It is idempotent and safe from any
// goroutine.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.mu.Lock()
		s.handlers.Shut()
		close(s.stopping)
		spawned := s.spawned
		s.mu.Unlock()
		if !spawned {
			close(s.done)
		}
	})
	<-s.done
}

// Registered is the number of ranks registered in the current round.
func (s *Server) Registered() int { return s.board.registered() }

// AllRegistered returns a channel that is closed once every rank has
// registered in the first round.
func (s *Server) AllRegistered() <-chan struct{} { return s.board.all }

// Missing lists the ranks that have not registered in the current round
// yet, with their planned hosts (Addr is empty).
func (s *Server) Missing() []Peer { return s.board.missing() }

// Round is the current registration round: 1 until a rank that left
// (its runtime shut down) registers again, and one more each time the
// ranks form their mesh anew.
func (s *Server) Round() int { return s.board.currentRound() }

// Abort makes every later call, and every blocked one, fail with an error
// that wraps ErrAborted and carries reason; Watch loops report it. Only the
// first reason is kept.
func (s *Server) Abort(reason string) {
	if s.board.abort(reason) {
		s.log.Warn("rendezvous: job aborted", "reason", reason)
	}
}

// AbortLinger is how long AbortAndLinger keeps an aborted server up, so
// that ranks still waiting in it (their calls are held for at most about a
// second) learn why the job did not start.
const AbortLinger = 1500 * time.Millisecond

// AbortAndLinger is Abort, then a wait of AbortLinger: for the rank that
// serves the rendezvous and is about to stop it because the job could not
// start, so that the others fail with its reason rather than with a
// server that went away.
func (s *Server) AbortAndLinger(reason string) {
	s.Abort(reason)
	time.Sleep(AbortLinger)
}

// String names the server by its address; it never shows the secret.
func (s *Server) String() string { return "rendezvous.Server(" + s.Addr() + ")" }

// GoString is String, so %#v does not print the secret either.
func (s *Server) GoString() string { return s.String() }

// debugLogger routes gorpc's own error log to l at debug level: gorpc logs
// every timeout and broken connection, which callers already see as errors.
func debugLogger(l *slog.Logger) gorpc.LoggerFunc {
	return func(format string, args ...any) {
		l.Debug("rendezvous: gorpc: " + fmt.Sprintf(format, args...))
	}
}
