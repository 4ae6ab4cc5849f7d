package hvdtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/hvd"
)

// meshTimeout bounds forming a loopback TCP mesh (OverTCP).
const meshTimeout = 20 * time.Second

// An Option changes how Start and Run build the job.
type Option func(*job)

// job is what the options say.
type job struct {
	tcp       bool
	configure func(*hvd.Config)
}

// OverTCP links the ranks through a loopback TCP mesh
// (tcptransport.LocalMesh, shared memory where it can) instead of an
// in-memory network.
func OverTCP() Option { return func(j *job) { j.tcp = true } }

// WithConfig has configure adjust every rank's Config before its runtime
// starts: a knob, a logger, or a rendezvous to join instead of the
// transport that Start made (set Transport to nil and RendezvousAddr,
// Secret and StartTimeout).
func WithConfig(configure func(cfg *hvd.Config)) Option {
	return func(j *job) { j.configure = configure }
}

// Config returns the Config of rank r of a job of n ranks on one host
// ("localhost"), with every knob at its default and no transport.
func Config(r, n int) hvd.Config {
	cfg := hvd.DefaultConfig()
	cfg.Rank, cfg.Size, cfg.LocalRank, cfg.LocalSize = r, n, r, n
	cfg.Hostname = "localhost"
	return cfg
}

// Start starts the n runtimes of one job, all at once, and shuts them down
// when tb's test ends. Element r of the result is rank r. A runtime that
// does not start fails tb (after shutting the others down).
func Start(tb testing.TB, n int, opts ...Option) []*hvd.Runtime {
	tb.Helper()
	rts, err := start(n, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { shutdown(rts) })
	return rts
}

// Each runs f on every runtime at once and, once all have returned, fails
// tb with the errors of the ranks that failed.
func Each(tb testing.TB, rts []*hvd.Runtime, f func(rt *hvd.Runtime) error) {
	tb.Helper()
	if err := each(len(rts), func(r int) error { return f(rts[r]) }); err != nil {
		tb.Fatal(err)
	}
}

// Run starts the n runtimes of one job, runs f on every rank at once, shuts
// the runtimes down and returns the errors of the ranks that failed (or
// did not start), each naming its rank; nil when every rank succeeded.
func Run(n int, f func(rt *hvd.Runtime) error, opts ...Option) error {
	rts, err := start(n, opts)
	if err != nil {
		return err
	}
	defer shutdown(rts)
	return each(n, func(r int) error { return f(rts[r]) })
}

// start builds the configs of the n ranks and starts their runtimes at
// once (ranks that join a rendezvous wait for each other).
func start(n int, opts []Option) ([]*hvd.Runtime, error) {
	var j job
	for _, o := range opts {
		o(&j)
	}
	cfgs, err := j.configs(n)
	if err != nil {
		return nil, err
	}
	rts := make([]*hvd.Runtime, n)
	err = each(n, func(r int) (err error) {
		rts[r], err = hvd.NewRuntime(context.Background(), cfgs[r])
		return err
	})
	if err != nil {
		for r, rt := range rts {
			if rt == nil && cfgs[r].Transport != nil {
				cfgs[r].Transport.Close()
			}
		}
		shutdown(rts)
		return nil, err
	}
	return rts, nil
}

// configs returns every rank's Config, with its transport, as the
// options say.
func (j job) configs(n int) ([]hvd.Config, error) {
	var trs []collective.Transport
	if j.tcp {
		ctx, cancel := context.WithTimeout(context.Background(), meshTimeout)
		defer cancel()
		var err error
		if trs, err = tcptransport.LocalMesh(ctx, n, nil); err != nil {
			return nil, fmt.Errorf("hvdtest: %w", err)
		}
	} else {
		trs = memtransport.NewNetwork(n).Transports()
	}
	cfgs := make([]hvd.Config, n)
	for r := range n {
		cfgs[r] = Config(r, n)
		cfgs[r].Transport = trs[r]
		if j.configure != nil {
			j.configure(&cfgs[r])
		}
		if cfgs[r].Transport != trs[r] { // replaced: the rank does not use it
			trs[r].Close()
		}
	}
	return cfgs, nil
}

// each runs f for every rank at once and returns their errors, joined,
// each naming its rank.
func each(n int, f func(r int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if err := f(r); err != nil {
				errs[r] = fmt.Errorf("hvdtest: rank %d: %w", r, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shutdown shuts every runtime that started down.
func shutdown(rts []*hvd.Runtime) {
	for _, rt := range rts {
		if rt != nil {
			rt.Shutdown()
		}
	}
}
