package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/gorovod/gorovod/collective"
)

// Connect forms this rank's links of the full mesh described by cfg and
// returns the Transport over them.
//
// Each link is two sockets, one per direction (lane). Rank i dials both
// lanes to every lower rank (retrying with back-off while ctx lasts, since
// a peer may not be accepting yet) and accepts both lanes of every higher
// rank on ln, each accepted connection handshaking on its own goroutine. A
// connection that fails the handshake is closed, logged at Warn and
// forgotten; the mesh forms with the real peers. Connect owns ln and closes
// it before returning, whatever the outcome: after the mesh forms nothing
// more is accepted. ln may be nil for the highest rank, which accepts
// nothing. If ctx ends first, the error names the ranks that never
// connected and wraps ctx's error (and collective.ErrTimeout for a
// deadline). No goroutine started by Connect outlives it, except one
// watcher per shared-memory link, which ends by the time the transport's
// Close returns.
func Connect(ctx context.Context, ln *Listener, cfg Config) (collective.Transport, error) {
	return connect(ctx, ln, cfg, tuning{})
}

// connect is Connect with tun's settings; the package's tests and
// benchmarks set them.
func connect(ctx context.Context, ln *Listener, cfg Config, tun tuning) (collective.Transport, error) {
	cfg, err := cfg.normalize()
	if err == nil && ln == nil && cfg.Rank < cfg.Size-1 {
		err = fmt.Errorf("tcptransport: rank %d of %d needs a listener: %w", cfg.Rank, cfg.Size, collective.ErrInvalid)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	tun = tun.normalize(cfg.Rank, cfg.Addrs)
	f := newFormation(cfg, tun)
	socks, err := f.run(ctx, ln)
	if err != nil {
		return nil, err
	}
	var rings []*shmRings
	if !cfg.NoSharedMemory {
		rings = offerShm(cfg, tun.procDir, socks)
	}
	return newTransport(cfg, tun, socks, rings), nil
}

// formation is the state of one Connect: the sockets claimed so far.
type formation struct {
	cfg   Config
	tun   tuning
	log   *slog.Logger
	hello []byte

	mu      sync.Mutex
	socks   []lanes       // by peer rank; a lane is nil until claimed
	lastErr []error       // by lower peer rank: why the last dial failed
	need    int           // sockets not yet claimed
	sealed  bool          // Connect has decided; no more claims
	full    chan struct{} // closed when need reaches 0
}

// lanes holds the two sockets of one link, indexed by lane.
type lanes [2]*net.TCPConn

// complete reports whether both lanes are there.
func (l lanes) complete() bool { return l[laneOut] != nil && l[laneIn] != nil }

func newFormation(cfg Config, tun tuning) *formation {
	f := &formation{
		cfg:     cfg,
		tun:     tun,
		log:     cfg.Logger,
		hello:   hello(cfg.Rank, cfg.Size),
		socks:   make([]lanes, cfg.Size),
		lastErr: make([]error, cfg.Size),
		need:    2 * (cfg.Size - 1),
		full:    make(chan struct{}),
	}
	if f.need == 0 {
		close(f.full)
	}
	return f
}

// run dials and accepts until every peer is claimed or ctx ends, then stops
// every goroutine it started and returns the sockets, or an error naming
// the ranks that are missing.
func (f *formation) run(ctx context.Context, ln *Listener) ([]lanes, error) {
	inner, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if ln != nil {
		wg.Go(func() { f.acceptLoop(inner, ln.ln, &wg) })
	}
	for peer := range f.cfg.Rank {
		wg.Go(func() { f.dialLoop(inner, peer, laneOut) })
		wg.Go(func() { f.dialLoop(inner, peer, laneIn) })
	}
	select {
	case <-f.full:
	case <-ctx.Done():
	}
	f.seal()
	cancel()
	if ln != nil {
		ln.Close()
	}
	wg.Wait()
	if f.need > 0 {
		f.closeAll()
		return nil, f.incomplete(ctx)
	}
	f.log.Debug("tcptransport: mesh formed", "size", f.cfg.Size)
	return f.socks, nil
}

// claim registers nc as lane l of the link to rank. ack, if not nil, runs
// under the lock just before the claim takes effect (the server's
// acknowledgement), so a peer is acknowledged only if it is kept.
func (f *formation) claim(rank int, l lane, nc *net.TCPConn, ack func() error) error {
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
	f.need--
	if f.need == 0 {
		close(f.full)
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

// incomplete builds Connect's error when ctx ended before the mesh formed.
func (f *formation) incomplete(ctx context.Context) error {
	var missing []int
	var why []string
	for r, link := range f.socks {
		if r == f.cfg.Rank || link.complete() {
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
	return ctxError(ctx, msg)
}
