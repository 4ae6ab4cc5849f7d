package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
)

// Connect forms this rank's links to the peers of cfg.Eager (every peer
// when it is nil: the full mesh) and returns the Transport over them; the
// links to the other peers form on first use (see "Links on demand" in the
// package documentation).
//
// Each link is two sockets, one per direction (lane). Rank i dials both
// lanes to every lower rank (retrying with back-off while ctx lasts, since
// a peer may not be accepting yet) and accepts both lanes of every higher
// rank on ln, each accepted connection handshaking on its own goroutine. A
// connection that fails the handshake is closed, logged at Warn and
// forgotten; the mesh forms with the real peers. Connect owns ln: with the
// full mesh it closes it before returning, whatever the outcome, and
// nothing more is accepted; with links left to form on demand the
// transport keeps accepting on it until Close. ln may be nil for the
// highest rank of a full mesh, which accepts nothing. If ctx ends first, the error names
// the ranks that never connected and wraps ctx's error (and
// collective.ErrTimeout for a deadline). No goroutine started by Connect
// outlives it, except one watcher per shared-memory link and the forming
// of links on demand, which end by the time the transport's Close returns.
func Connect(ctx context.Context, ln *Listener, cfg Config) (collective.Transport, error) {
	return connect(ctx, ln, cfg, tuning{})
}

// connect is Connect with tun's settings; the package's tests and
// benchmarks set them.
func connect(ctx context.Context, ln *Listener, cfg Config, tun tuning) (collective.Transport, error) {
	cfg, err := cfg.normalize()
	if err == nil && ln == nil && (cfg.Rank < cfg.Size-1 || cfg.Eager != nil && cfg.Size > 1) {
		// With links on demand even the highest rank accepts: a lower
		// rank calls it to ask for a link.
		err = fmt.Errorf("tcptransport: rank %d of %d needs a listener: %w", cfg.Rank, cfg.Size, collective.ErrInvalid)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	tun = tun.normalize(cfg.Rank, cfg.Addrs, cfg.Machines)
	tun.rawIO = tun.parksOnly(cfg.NoSharedMemory)
	tun.log = cfg.Logger
	tun.crossCongestion, tun.congestionWarned = crossChoice(cfg.Congestion), new(atomic.Bool)
	guard, err := auth.NewGuard(cfg.Secret, cfg.TLS)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("tcptransport: %w", err)
	}
	f := newFormation(cfg, tun)
	f.guard = guard
	socks, err := f.run(ctx, ln)
	if err != nil {
		return nil, err
	}
	return newTransport(cfg, tun, f, socks), nil
}

// formation forms a rank's links: the eager ones during Connect, then,
// handed over to the transport, the others on demand.
type formation struct {
	cfg   Config
	tun   tuning
	guard *auth.Guard // every connection's handshake, plain or TLS
	log   *slog.Logger
	hello []byte
	eager []bool // by peer: Connect forms the link
	lazy  bool   // some link forms on demand
	ln    *Listener

	life      context.Context // the accept loop's and on-demand dials' context: until stop
	stopLife  context.CancelFunc
	accepting sync.WaitGroup // the accept loop
	dials     sync.WaitGroup // on-demand dials
	setups    sync.WaitGroup // on-demand link set-ups (see handOver)

	mu      sync.Mutex
	socks   []lanes                 // by peer rank; a lane is nil until claimed
	lastErr []error                 // by lower peer rank: why the last dial failed
	reject  string                  // the last connection rejected, and why; "" for none
	need    int                     // sockets of eager links not yet claimed
	sealed  bool                    // no more claims: Connect failed, or the transport closed
	full    chan struct{}           // closed when need reaches 0
	dialing []bool                  // by peer rank: on-demand dials (or a call) started
	handed  []bool                  // by peer: the sockets went to the transport
	form    func(peer int, l lanes) // the transport's set-up of a link on demand; nil until handOver
}

// lanes holds the two sockets of one link, indexed by lane.
type lanes [2]*sock

// complete reports whether both lanes are there.
func (l lanes) complete() bool { return l[laneOut] != nil && l[laneIn] != nil }

func newFormation(cfg Config, tun tuning) *formation {
	f := &formation{
		cfg:     cfg,
		tun:     tun,
		log:     cfg.Logger,
		hello:   hello(cfg.Rank, cfg.Size),
		eager:   make([]bool, cfg.Size),
		socks:   make([]lanes, cfg.Size),
		lastErr: make([]error, cfg.Size),
		dialing: make([]bool, cfg.Size),
		handed:  make([]bool, cfg.Size),
		full:    make(chan struct{}),
	}
	f.life, f.stopLife = context.WithCancel(context.Background())
	if cfg.Eager == nil {
		for p := range f.eager {
			f.eager[p] = p != cfg.Rank
		}
	} else {
		for _, p := range cfg.Eager {
			f.eager[p] = true
		}
	}
	for p, e := range f.eager {
		if e {
			f.need += 2
		} else if p != cfg.Rank {
			f.lazy = true
		}
	}
	if f.need == 0 {
		close(f.full)
	}
	return f
}

// run dials and accepts until every eager link is claimed or ctx ends,
// then stops the dials it started, and returns the sockets of the eager
// links, or an error naming the ranks that are missing. With links left to
// form on demand the accept loop goes on (until stop); otherwise it ends
// here, and ln is closed.
func (f *formation) run(ctx context.Context, ln *Listener) ([]lanes, error) {
	f.ln = ln
	inner, cancel := context.WithCancel(ctx)
	var dials sync.WaitGroup
	if ln != nil {
		f.accepting.Go(func() { f.acceptLoop(f.life, ln) })
	}
	for peer := range f.cfg.Rank {
		if f.eager[peer] {
			dials.Go(func() { f.dialLoop(inner, peer, laneOut) })
			dials.Go(func() { f.dialLoop(inner, peer, laneIn) })
		}
	}
	select {
	case <-f.full:
	case <-ctx.Done():
	}
	cancel()
	dials.Wait()
	f.mu.Lock()
	missing := f.need > 0
	f.mu.Unlock()
	if missing || !f.lazy {
		f.stop()
	}
	if missing {
		f.closeAll()
		return nil, f.incomplete(ctx)
	}
	f.log.Debug("tcptransport: mesh formed", "size", f.cfg.Size, "on_demand", f.lazy)
	f.mu.Lock()
	defer f.mu.Unlock()
	socks := make([]lanes, len(f.socks))
	for p := range f.socks {
		if f.eager[p] {
			socks[p], f.handed[p] = f.socks[p], true
		}
	}
	return socks, nil
}

// localEager counts the eager links to peers on this rank's host.
func (f *formation) localEager() int {
	self, n := hostOf(f.cfg.Addrs[f.cfg.Rank]), 0
	for p, e := range f.eager {
		if e && hostOf(f.cfg.Addrs[p]) == self {
			n++
		}
	}
	return n
}

// handOver gives the forming of links on demand to form, which sets up a
// link once both its sockets are there; links whose sockets came during
// Connect are set up at once.
func (f *formation) handOver(form func(peer int, l lanes)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sealed {
		return
	}
	f.form = form
	for p := range f.socks {
		f.setUpLocked(p)
	}
}

// setUpLocked starts the set-up of the link to peer on demand if its
// sockets are both there and the transport has not got them yet. f.mu is
// held.
func (f *formation) setUpLocked(peer int) {
	if f.form == nil || f.handed[peer] || !f.socks[peer].complete() {
		return
	}
	f.handed[peer] = true
	l, form := f.socks[peer], f.form
	f.setups.Go(func() { form(peer, l) })
}

// dial starts forming the link to peer on demand, unless that has started
// already or the formation has stopped: the higher rank of the two dials
// the link's lanes; the lower one calls the higher one to ask for that.
func (f *formation) dial(peer int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sealed || f.dialing[peer] || f.eager[peer] || f.socks[peer].complete() {
		return
	}
	f.dialing[peer] = true
	if peer > f.cfg.Rank {
		f.dials.Go(func() { f.callLoop(f.life, peer) })
		return
	}
	f.dials.Go(func() { f.dialLoop(f.life, peer, laneOut) })
	f.dials.Go(func() { f.dialLoop(f.life, peer, laneIn) })
}

// stop ends the forming of links: no more claims, the accept loop and the
// dials end, and ln is closed. Set-ups already started go on (see
// waitSetups).
func (f *formation) stop() {
	f.seal()
	f.stopLife()
	if f.ln != nil {
		f.ln.Close()
	}
	f.accepting.Wait()
	f.dials.Wait()
}

// waitSetups waits for the set-ups of links on demand that have started.
func (f *formation) waitSetups() { f.setups.Wait() }

// closeLanes closes the sockets claimed for the link to peer.
func (f *formation) closeLanes(peer int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, nc := range f.socks[peer] {
		if nc != nil {
			nc.Close()
		}
	}
}

// claim registers nc as lane l of the link to rank. ack, if not nil, runs
// under the lock just before the claim takes effect (the server's
// acknowledgement), so a peer is acknowledged only if it is kept.
func (f *formation) claim(rank int, l lane, nc *sock, ack func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.sealed:
		return errSealed
	case f.socks[rank][l] != nil:
		return fmt.Errorf("duplicate connection for rank %d lane %s", rank, l.name(f.cfg.Rank, rank))
	}
	if ack != nil {
		if err := ack(); err != nil {
			return err
		}
	}
	f.socks[rank][l] = nc
	if f.eager[rank] {
		f.need--
		if f.need == 0 {
			close(f.full)
		}
	} else {
		f.setUpLocked(rank)
	}
	return nil
}

// errSealed rejects a connection that completes after Connect decided.
var errSealed = errors.New("mesh formation has ended")

func (f *formation) seal() {
	f.mu.Lock()
	f.sealed = true
	f.mu.Unlock()
}

func (f *formation) closeAll() {
	for _, link := range f.socks {
		for _, nc := range link {
			if nc != nil {
				nc.Close()
			}
		}
	}
}

// noteDialError remembers why the last dial to a lower rank failed, for the
// error Connect returns if that rank never connects.
func (f *formation) noteDialError(peer int, err error) {
	f.mu.Lock()
	f.lastErr[peer] = err
	f.mu.Unlock()
}

// noteReject remembers the last connection the accept loop rejected, for
// the error Connect returns if the mesh does not form: a peer turned away
// (a TLS mismatch, another job's secret) is then named on this side too.
func (f *formation) noteReject(remote string, err error) {
	f.mu.Lock()
	f.reject = fmt.Sprintf("%s: %v", remote, err)
	f.mu.Unlock()
}

// incomplete builds Connect's error when ctx ended before the mesh formed.
func (f *formation) incomplete(ctx context.Context) error {
	var missing []int
	var why []string
	for r, link := range f.socks {
		if !f.eager[r] || link.complete() {
			continue
		}
		missing = append(missing, r)
		if err := f.lastErr[r]; err != nil {
			why = append(why, fmt.Sprintf("rank %d (%s): %v", r, f.cfg.Addrs[r], err))
		}
	}
	msg := fmt.Sprintf("tcptransport: rank %d: mesh incomplete: rank(s) %v never connected", f.cfg.Rank, missing)
	if len(why) > 0 {
		msg += "; last dial errors: " + strings.Join(why, "; ")
	}
	f.mu.Lock()
	if f.reject != "" {
		msg += "; last connection rejected: " + f.reject
	}
	f.mu.Unlock()
	return ctxError(ctx, msg)
}
