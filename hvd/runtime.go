package hvd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/runner"
	"github.com/gorovod/gorovod/runner/rendezvous"
)

// Config builds a Runtime. The zero value is a single rank of size 1.
type Config struct {
	// Env is the launcher–worker contract (ranks, sizes, rendezvous address,
	// secret, knobs), as runner.FromEnviron reads it from the environment.
	Env runner.WorkerEnv
	// Transport, when set, is used instead of the rendezvous and TCP mesh
	// (tests run N runtimes in one process over memtransport this way);
	// Env's Rank and Size must match it.
	Transport collective.Transport
	// Logger receives the runtime's logs; nil means slog.Default().
	Logger *slog.Logger
	// Comm tunes the collective communicator.
	Comm collective.Options
}

// Runtime is one rank's view of a job: its place in the job and the
// collective operations on named tensors. Operations are executed in the
// order they are submitted, one at a time, by the runtime's own goroutine;
// every rank must submit the same operations in the same order.
type Runtime struct {
	env  runner.WorkerEnv
	log  *slog.Logger
	comm *collective.Comm
	rdv  *rendezvous.Client // nil without a launcher

	queue    chan *request
	stop     context.CancelFunc
	ctx      context.Context // ends at Shutdown; operations run under it
	finished chan struct{}   // closed when the executor goroutine has left

	mu       sync.Mutex
	inflight map[string]bool
	closed   bool
}

// NewRuntime joins the job described by cfg: it registers with the
// launcher's rendezvous, forms the data-plane mesh, and starts the
// executor. It returns when every rank is connected or ctx ends (the
// environment's start timeout bounds it too).
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	env := cfg.Env
	if env.Size == 0 {
		env = runner.DefaultWorkerEnv()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("rank", env.Rank)
	r := &Runtime{env: env, log: log, inflight: map[string]bool{}, queue: make(chan *request, 1024), finished: make(chan struct{})}
	tr := cfg.Transport
	if tr == nil && env.Size == 1 {
		tr = memtransport.NewNetwork(1).Transport(0)
	}
	if tr == nil {
		var err error
		if tr, r.rdv, err = connect(ctx, env, log); err != nil {
			return nil, err
		}
	}
	if tr.Rank() != env.Rank || tr.Size() != env.Size {
		tr.Close()
		return nil, fmt.Errorf("hvd: transport is rank %d of %d, environment says %d of %d", tr.Rank(), tr.Size(), env.Rank, env.Size)
	}
	r.comm = collective.NewComm(tr, cfg.Comm)
	r.ctx, r.stop = context.WithCancel(context.Background())
	if r.rdv != nil {
		r.rdv.Watch(r.ctx, 0, 0, func(err error) {
			r.log.Error("hvd: lost the launcher", "err", err)
			r.comm.Abort(fmt.Errorf("%w: %w", ErrLauncherLost, err))
		})
	}
	go r.execute() // "hvd-executor"
	return r, nil
}

// Rank is this process's rank in [0, Size).
func (r *Runtime) Rank() int { return r.env.Rank }

// Size is the number of ranks in the job.
func (r *Runtime) Size() int { return r.env.Size }

// LocalRank is this rank's index among the ranks on its host.
func (r *Runtime) LocalRank() int { return r.env.LocalRank }

// LocalSize is the number of ranks on this rank's host.
func (r *Runtime) LocalSize() int { return r.env.LocalSize }

// CrossRank is this host's index among the hosts that have a rank with
// this LocalRank.
func (r *Runtime) CrossRank() int { return r.env.CrossRank }

// CrossSize is the number of hosts that have a rank with this LocalRank.
func (r *Runtime) CrossSize() int { return r.env.CrossSize }

// Env is the contract this runtime was built from (the secret included:
// do not log it whole; its String method redacts the secret).
func (r *Runtime) Env() runner.WorkerEnv { return r.env }

// Err reports the failure that ended the runtime's communicator, or nil.
func (r *Runtime) Err() error { return r.comm.Err() }

// Shutdown stops accepting operations, fails those still queued, closes
// the connections and returns once the runtime's goroutines are gone. It
// is not collective: a rank may shut down while others still run, and
// their later operations then fail naming it. Shutdown is idempotent.
func (r *Runtime) Shutdown() error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if !already {
		close(r.queue)
	}
	<-r.finished
	r.stop()
	r.comm.Close()
	if r.rdv != nil {
		r.rdv.Close()
	}
	return nil
}

// Comm is the communicator under the runtime, for benchmarks and tools
// that drive collectives directly. Calls on it bypass the named-tensor
// queue: make them only while no named operation is in flight, in the same
// order on every rank.
func (r *Runtime) Comm() *collective.Comm { return r.comm }
