package ps

// The coordinator's wire: gorpc, authenticated with the job secret as the
// rendezvous is (internal/auth's Guard in OnConnect on both sides, TLS
// when asked), without compression, flushed at once, with small queues
// and buffers. Every unexported name here starts with "coord" so that it
// cannot collide with the parameter servers' wire in the same package.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/lifecycle"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/valyala/gorpc"
)

// MaxStepBytes bounds the arguments of a scheduled step and the result a
// step function returns. A larger one is an error (ErrTooLarge): steps
// carry small control values (a batch number, a loss), while the
// variables travel between workers and parameter servers.
const MaxStepBytes = 16 << 20

// DefaultHeartbeatTimeout is how long a worker may be silent before the
// coordinator drops it, and how long a worker that has reached the chief
// once tries to reach it again before giving up, when no other timeout is
// configured.
const DefaultHeartbeatTimeout = 10 * time.Second

// Protocol identifiers bound into the handshake, so that a rendezvous or
// parameter-server peer cannot be mistaken for a coordinator peer.
const (
	coordHelloWorker = "gorovod-ps-worker/1"
	coordHelloChief  = "gorovod-ps-coordinator/1"
	coordServiceName = "Coordinator"
)

// coordHandshakeTimeout bounds the authentication of one connection.
const coordHandshakeTimeout = 5 * time.Second

// coordMaxHandshakes bounds the connections inside the handshake at once
// at the coordinator: an intruder's silent connections cost the chief at
// most this many sockets, each for at most coordHandshakeTimeout.
const coordMaxHandshakes = 1024

// coordMaxPoll bounds how long the coordinator holds one Next call; the
// worker asks for less (see coordPollWait) and asks again.
const coordMaxPoll = 5 * time.Second

// coordRPCPending and coordRPCBuffer size each gorpc connection's queue of
// calls in flight and its read and write buffers, at both ends, as the
// rendezvous does: a worker has at most three calls in flight (a poll or
// a result, a heartbeat, and one abandoned by a timeout), and a step's
// arguments or result larger than the buffer still pass, through more
// reads and writes.
const (
	coordRPCPending = 16
	coordRPCBuffer  = 4 << 10
)

// Kinds of answer to Next, Heartbeat and Done.
const (
	coordAnsNothing  = iota // no step yet: ask again
	coordAnsStep            // Next: run this step
	coordAnsStop            // the chief stopped: exit cleanly
	coordAnsReplaced        // a newer incarnation of this worker index joined
)

// Outcomes a worker reports for a step in Done.
const (
	coordOK          = iota // Result holds the step's result
	coordStepError          // the step function failed; Err says why
	coordUnknownStep        // no step function of that name; Known lists the worker's
	coordServerError        // a parameter server failed; ServerIndex, ServerAddr, Err
	coordTooLarge           // the result exceeded MaxStepBytes; Err says by how much
)

// Wire types, carried by gob inside gorpc's dispatcher envelope.
type (
	// coordWorkerID names one incarnation of a worker: its index and a
	// number drawn at random by each RunWorker call.
	coordWorkerID struct {
		Index       int
		Incarnation uint64
	}
	coordNextReq struct {
		Worker coordWorkerID
		Wait   time.Duration // how long the coordinator may hold the call
	}
	coordAnswer struct {
		Kind int
		// The chief's heartbeat timeout, so that a worker beats and gives
		// up at the chief's pace.
		HeartbeatTimeout time.Duration
		// A step, when Kind is coordStep.
		ID   uint64
		Name string
		Args []byte
	}
	coordDoneReq struct {
		Worker      coordWorkerID
		ID          uint64
		Outcome     int
		Result      []byte
		Err         string
		Known       []string // coordUnknownStep: the worker's step names
		ServerIndex int      // coordServerError
		ServerAddr  string   // coordServerError
	}
)

// newCoordDispatcher builds the dispatcher of the coordinator service.
// Worker clients pass a nil *coordService: they need only the method
// table and the gob registrations that AddService performs.
func newCoordDispatcher(svc *coordService) *gorpc.Dispatcher {
	srvDispatcherMu.Lock() // one lock for every dispatcher of the package (see wire.go)
	defer srvDispatcherMu.Unlock()
	for _, v := range []any{&coordNextReq{}, &coordAnswer{}, &coordDoneReq{}, &coordWorkerID{}} {
		gorpc.RegisterType(v)
	}
	d := gorpc.NewDispatcher()
	d.AddService(coordServiceName, svc)
	return d
}

// coordListener lets gorpc's server accept from a net.Listener that is
// already listening (CoordinatorConfig.Listener) or one it opens on Addr.
type coordListener struct {
	ln net.Listener
}

func (l *coordListener) Init(addr string) error {
	if l.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l.ln = ln
	return nil
}

func (l *coordListener) Accept() (io.ReadWriteCloser, string, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, "", err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(15 * time.Second)
	}
	return c, c.RemoteAddr().String(), nil
}

func (l *coordListener) Close() error { return l.ln.Close() }

func (l *coordListener) ListenAddr() net.Addr {
	if l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}

// coordServerConn is an authenticated connection at the coordinator. It
// tells the coordinator once when it breaks (a read fails: the worker's
// process died or its network went) or is closed, so that the worker is
// dropped at once rather than after the heartbeat timeout.
type coordServerConn struct {
	net.Conn
	remote string
	gone   func(*coordServerConn)
	once   sync.Once
}

func (c *coordServerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.gone(c) })
	}
	return n, err
}

func (c *coordServerConn) Close() error {
	c.once.Do(func() { c.gone(c) })
	return c.Conn.Close()
}

// onConnect is the coordinator's gorpc OnConnect hook: the mutual
// handshake (inside TLS with CoordinatorConfig.TLS) under
// coordHandshakeTimeout, before gorpc reads a byte. At most
// coordMaxHandshakes connections are inside it at once; Stop closes them.
func (c *Coordinator) onConnect(remote string, rwc io.ReadWriteCloser) (io.ReadWriteCloser, error) {
	conn, ok := rwc.(net.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: transport %T has no deadline", auth.ErrAuth, rwc)
	}
	added, full := c.handshakes.AddBelow(conn, coordMaxHandshakes)
	if full {
		c.log.Warn("ps: coordinator refused a connection: too many in the handshake at once", "remote", remote, "limit", coordMaxHandshakes)
		return nil, fmt.Errorf("%w: %s: refused: %d connections in the handshake", auth.ErrAuth, remote, coordMaxHandshakes)
	}
	if !added {
		return nil, ErrCoordinatorStopped
	}
	defer c.handshakes.Remove(conn)
	stream, hello, err := c.guard.Server(conn, []byte(coordHelloChief), time.Now().Add(coordHandshakeTimeout))
	if err == nil && string(hello) != coordHelloWorker {
		err = fmt.Errorf("%w: peer speaks %q, not the coordinator protocol", auth.ErrAuth, hello)
	}
	if err != nil {
		if !c.handshakes.IsClosed() {
			c.log.Warn("ps: coordinator rejected a connection", "remote", remote, "err", err)
		}
		return nil, fmt.Errorf("%s: %w", remote, err)
	}
	sc := &coordServerConn{Conn: stream, remote: remote, gone: c.connGone}
	if !c.connOpened(sc) {
		return nil, ErrCoordinatorStopped
	}
	return sc, nil
}

// coordLink is a worker's view of its connection to the chief: whether
// one is up, consecutive failures (for the back-off and for the
// wrong-secret verdict) and the last connection error.
type coordLink struct {
	mu        sync.Mutex
	up        bool
	fails     int // consecutive dial or handshake failures
	authFails int // consecutive handshakes the chief took part in and failed
	lastErr   error
	last      time.Time     // start of the latest dial
	changed   chan struct{} // closed and replaced on every change
}

func newCoordLink() *coordLink { return &coordLink{changed: make(chan struct{})} }

func (l *coordLink) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *coordLink) connected() {
	l.mu.Lock()
	l.up, l.fails, l.authFails, l.lastErr = true, 0, 0, nil
	l.notifyLocked()
	l.mu.Unlock()
}

// down records that the connection broke or closed.
func (l *coordLink) down(err error) {
	l.mu.Lock()
	l.up = false
	if l.lastErr == nil {
		l.lastErr = err
	}
	l.notifyLocked()
	l.mu.Unlock()
}

func (l *coordLink) failed(err error, handshake bool) {
	l.mu.Lock()
	l.up = false
	l.fails++
	if handshake {
		l.authFails++
	} else {
		l.authFails = 0
	}
	l.lastErr = err
	l.notifyLocked()
	l.mu.Unlock()
}

// state is a snapshot and the channel closed at the next change.
func (l *coordLink) state() (up bool, authFails int, lastErr error, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up, l.authFails, l.lastErr, l.changed
}

// pace waits before the next dial as the back-off asks: 50ms after the
// first failure, doubling to 1s, ±20% jitter, and never two dials less
// than 50ms apart. It returns false when ctx ends first.
func (l *coordLink) pace(ctx context.Context) bool {
	l.mu.Lock()
	wait := time.Until(l.last.Add(50 * time.Millisecond))
	if l.fails > 0 {
		d := min((50*time.Millisecond)<<min(l.fails-1, 8), time.Second)
		wait = max(wait, time.Duration(float64(d)*(0.8+0.4*rand.Float64())))
	}
	l.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
	return true
}

// coordHeardConn notes whether the other end sent a byte: a chief that
// closed a connection without a word (too many handshakes at once) has
// not judged the secret.
type coordHeardConn struct {
	net.Conn
	heard bool
}

func (h *coordHeardConn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 {
		h.heard = true
	}
	return n, err
}

// coordTrackedConn is a worker's connection to the chief: it leaves its
// set when gorpc closes it, and marks the link down once when it breaks.
type coordTrackedConn struct {
	net.Conn
	set  *lifecycle.Conns
	link *coordLink
	once sync.Once
}

func (t *coordTrackedConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if err != nil {
		t.once.Do(func() { t.link.down(fmt.Errorf("connection to the chief broke: %w", err)) })
	}
	return n, err
}

func (t *coordTrackedConn) Close() error {
	t.once.Do(func() { t.link.down(errors.New("connection to the chief closed")) })
	t.set.Remove(t)
	return t.Conn.Close()
}

// coordRPCLog routes gorpc's own error log to l at debug level: gorpc logs
// every broken connection, which callers already see as errors.
func coordRPCLog(l *slog.Logger) gorpc.LoggerFunc {
	return func(format string, args ...any) {
		l.Debug("ps: coordinator: gorpc: " + fmt.Sprintf(format, args...))
	}
}

// coordNoLimit is addBelow's bound for a set without one.
const coordNoLimit = math.MaxInt
