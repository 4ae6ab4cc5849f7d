package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// freezable is one rank's transport that can be frozen, as `kill -STOP`
// freezes a process: calls it makes from then on block, deaf to their
// context, until the transport is closed (the process is killed). freeze
// stops the rank at once, wherever it is; freezeBetweenOps lets the
// operation under way finish and stops the rank before its next one.
type freezable struct {
	collective.Transport
	conns  []collective.Conn
	seen   atomic.Uint64 // the highest operation number of any call so far
	from   atomic.Uint64 // calls of this operation and later ones block; 0: none
	killed chan struct{}
	once   sync.Once
}

// newFreezable wraps tr, not frozen yet.
func newFreezable(tr collective.Transport) *freezable {
	f := &freezable{Transport: tr, conns: make([]collective.Conn, tr.Size()), killed: make(chan struct{})}
	for p := range f.conns {
		if p != tr.Rank() {
			f.conns[p] = freezeConn{tr.Conn(p), f}
		}
	}
	return f
}

// Conn returns the freezable link to peer.
func (f *freezable) Conn(peer int) collective.Conn {
	if peer >= 0 && peer < len(f.conns) && f.conns[peer] != nil {
		return f.conns[peer]
	}
	return f.Transport.Conn(peer)
}

// freeze stops the rank at once, even in the middle of an operation.
func (f *freezable) freeze() { f.from.Store(1) }

// freezeBetweenOps stops the rank once the operation under way (if any)
// is done: every call of a later operation blocks.
func (f *freezable) freezeBetweenOps() { f.from.Store(f.seen.Load() + 1) }

// Close kills the frozen rank: its blocked calls fail, then the transport
// closes.
func (f *freezable) Close() error {
	f.once.Do(func() { close(f.killed) })
	return f.Transport.Close()
}

// stopped blocks a call of operation seq of a frozen rank until it is
// killed.
func (f *freezable) stopped(seq uint64) error {
	for {
		old := f.seen.Load()
		if seq <= old || f.seen.CompareAndSwap(old, seq) {
			break
		}
	}
	if from := f.from.Load(); from == 0 || seq < from {
		return nil
	}
	<-f.killed
	return fmt.Errorf("frozen rank %d killed: %w", f.Rank(), collective.ErrClosed)
}

// freezeConn is a link of a freezable transport.
type freezeConn struct {
	collective.Conn
	f *freezable
}

// Send blocks once the rank is frozen, else sends.
func (c freezeConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.f.stopped(tag.Seq); err != nil {
		return err
	}
	return c.Conn.Send(ctx, tag, p)
}

// Recv blocks once the rank is frozen, else receives.
func (c freezeConn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	if err := c.f.stopped(tag.Seq); err != nil {
		return err
	}
	return c.Conn.Recv(ctx, tag, p)
}

// trainStep all-reduces two small gradients on e and waits for them.
func trainStep(e *engine.Engine) error {
	hs := []*engine.Handle{
		e.Submit(allreduceReq("grad/w", kernels.F32, kernels.Sum, 4), make([]byte, 16)),
		e.Submit(allreduceReq("grad/b", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// frozenRun is the outcome of runFrozen: each rank's error and when it
// failed, and when the frozen rank froze.
type frozenRun struct {
	errs     []error
	failed   []time.Time
	frozenAt time.Time
	es       []*engine.Engine
}

// runFrozen starts n engines over mk with OpTimeout opTimeout; every rank
// trains in a loop until it fails, except that rank frozen calls freeze on
// its transport before step freezeStep and stops. It fails t unless every
// other rank has failed within limit.
func runFrozen(t *testing.T, mk meshtest.Func, n, frozen int, opTimeout, limit time.Duration, freeze func(*freezable)) frozenRun {
	t.Helper()
	const freezeStep = 5 // the response cache serves every step after the first
	ts := mk(t, n)
	fz := newFreezable(ts[frozen])
	ts[frozen] = fz
	cfg := testConfig()
	cfg.OpTimeout = opTimeout
	run := frozenRun{errs: make([]error, n), failed: make([]time.Time, n), es: make([]*engine.Engine, n)}
	cs := make([]*collective.Comm, n)
	for r, tr := range ts {
		cs[r] = collective.NewComm(tr, collective.Options{})
		run.es[r] = engine.New(cs[r], cfg)
	}
	t.Cleanup(func() {
		fz.Close() // kill the frozen rank first: its engine is stuck in a call
		var wg sync.WaitGroup
		for _, e := range run.es {
			wg.Go(e.Shutdown)
		}
		wg.Wait()
		for _, c := range cs {
			c.Close()
		}
	})
	frozenAt := make(chan time.Time, 1)
	var wg sync.WaitGroup
	for r, e := range run.es {
		wg.Go(func() {
			for step := 0; ; step++ {
				if r == frozen && step == freezeStep {
					freeze(fz)
					frozenAt <- time.Now()
					return
				}
				if err := trainStep(e); err != nil {
					run.errs[r], run.failed[r] = fmt.Errorf("step %d: %w", step, err), time.Now()
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the ranks still wait %v after the start", limit)
	}
	run.frozenAt = <-frozenAt
	return run
}

// TestEngineFrozenRankTimesOut: every rank trains in a loop; after a few
// steps one rank freezes between two operations, as a process stopped with
// `kill -STOP` outside any collective: it submits nothing more and its
// engine answers no negotiation. With OpTimeout 300 ms every other rank's
// step must fail within 5 s of the freeze with an error that wraps
// ErrTimeout and names the frozen rank, and later submissions must fail at
// once. Before the negotiation was bounded, the others waited in it for
// ever.
func TestEngineFrozenRankTimesOut(t *testing.T) {
	const opTimeout, bound = 300 * time.Millisecond, 5 * time.Second
	for _, c := range []struct {
		name      string
		mk        meshtest.Func
		n, frozen int
	}{
		{"mem/2", meshtest.Mem, 2, 1},
		{"mem/3", meshtest.Mem, 3, 0},
		{"mem/4", meshtest.Mem, 4, 2},
		{"mem/5", meshtest.Mem, 5, 4},
		{"tcp/3", meshtest.TCP, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := runFrozen(t, c.mk, c.n, c.frozen, opTimeout, 2*bound, (*freezable).freezeBetweenOps)
			want := fmt.Sprintf("no answer from rank %d within %v", c.frozen, opTimeout)
			for r, err := range run.errs {
				if r == c.frozen {
					continue
				}
				if !errors.Is(err, collective.ErrTimeout) || !strings.Contains(err.Error(), want) {
					t.Fatalf("rank %d: %v; want an error wrapping collective.ErrTimeout that says %q", r, err, want)
				}
				if d := run.failed[r].Sub(run.frozenAt); d < 0 || d > bound {
					t.Fatalf("rank %d failed %v after rank %d froze, want within [0, %v]: %v", r, d, c.frozen, bound, err)
				}
				t.Logf("rank %d after %v: %v", r, run.failed[r].Sub(run.frozenAt).Round(time.Millisecond), err)
				later := run.es[r].Submit(allreduceReq("later", kernels.F32, kernels.Sum, 1), make([]byte, 4))
				select {
				case <-later.Done():
				default:
					t.Fatalf("rank %d: a later submission did not fail at once", r)
				}
				if !errors.Is(later.Err(), collective.ErrTimeout) {
					t.Fatalf("rank %d: a later submission failed with %v", r, later.Err())
				}
			}
		})
	}
}
