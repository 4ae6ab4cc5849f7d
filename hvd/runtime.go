package hvd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
	"github.com/gorovod/gorovod/settings"
)

// Runtime is one rank's view of a job: its place in the job and the
// collective operations on named tensors. Ranks may submit their tensors
// in any order: the runtime's engine (engine.Engine) negotiates which
// names every rank has submitted, fuses them into few large operations
// and runs them in the same order everywhere.
type Runtime struct {
	env      jobenv.Env
	log      *slog.Logger
	comm     *collective.Comm
	engine   *engine.Engine
	timeline *os.File           // rank 0's timeline file, or nil
	tuneLog  *os.File           // rank 0's autotuning log, or nil
	rdv      *rendezvous.Client // gorun's rendezvous; nil without gorun
	launcher string             // what started the job (runner.Launcher*)
	hostOf   []string           // each rank's host, from the rendezvous; nil for a given transport
	// machineOf is each rank's machine (jobenv.MachineID), from the
	// rendezvous; nil for a given transport.
	machineOf []string

	routeHints []string    // the launcher's other hosts, for choosing a data-plane address
	psets      processSets // the process sets (processset.go)

	links *blameTransport // the counting links under gorun, or nil
	pub   *publisher      // LogScalars' buffer and sender

	stop context.CancelFunc // ends the launcher watch
	dev  deviceState        // the GPU context and staging buffers, opened on first use

	mu     sync.Mutex
	closed bool
}

// NewRuntime joins the job described by cfg: it registers with the
// launcher's rendezvous, forms the data-plane mesh, and starts the
// engine. It returns when every rank is connected or ctx ends (the
// environment's start timeout bounds it too).
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	env := cfg.workerEnv()
	log, err := runtimeLogger(cfg.Logger, env)
	if err != nil {
		return nil, err
	}
	r := &Runtime{env: env, log: log, launcher: cfg.Plan.Launcher}
	tr := cfg.Transport
	if tr == nil && env.Size == 1 {
		tr = memtransport.NewNetwork(1).Transport(0)
	}
	if tr == nil {
		if tr, err = r.join(ctx, cfg.Plan); err != nil {
			return nil, err
		}
		env = r.env
	}
	if tr.Rank() != env.Rank || tr.Size() != env.Size {
		tr.Close()
		return nil, fmt.Errorf("hvd: transport is rank %d of %d, environment says %d of %d", tr.Rank(), tr.Size(), env.Rank, env.Size)
	}
	tr = r.reportPeerFailures(tr) // tells gorun when a peer's failure fails this rank (blame.go)
	copts := r.commOptions(cfg.Comm)
	r.comm = collective.NewComm(tr, copts)
	if env.Rank == 0 && copts.Hosts != nil {
		r.log.Debug("hvd: host layout", "hosts", hostCount(copts.Hosts), "ranks", env.Size,
			"machines", knownMachines(r.machineOf),
			"two_level", r.comm.HierarchicalLayout(), "hierarchical", r.env.Hierarchical.String())
	}
	r.pub = newPublisher(r)
	ecfg, err := r.engineConfig()
	if err != nil {
		r.comm.Close()
		if r.rdv != nil {
			leave(r.rdv, r.log)
			r.rdv.Close()
		}
		return nil, err
	}
	r.engine = engine.New(r.comm, ecfg)
	r.pub.start()
	r.watchLauncher()
	r.logJoin(cfg.Plan)
	sets, err := cfg.processSets()
	if err == nil {
		err = r.addConfiguredSets(ctx, sets)
	}
	if err != nil {
		r.Shutdown()
		return nil, err
	}
	return r, nil
}

// logJoin has rank 0 say once which launcher started the job (at debug
// level under gorun, which speaks for itself) and log the plan's warnings.
func (r *Runtime) logJoin(plan jobenv.JoinPlan) {
	if r.env.Rank != 0 || plan.Launcher == "" {
		return
	}
	level := slog.LevelInfo
	if plan.Launcher == jobenv.LauncherGorun {
		level = slog.LevelDebug
	}
	r.log.Log(context.Background(), level, "hvd: joined the job", "launcher", plan.Launcher,
		"size", r.env.Size, "rendezvous", r.env.RendezvousAddr, "vars", strings.Join(plan.Vars, " "))
	for _, note := range plan.Notes {
		r.log.Warn("hvd: " + note)
	}
}

// join connects this rank to the others. Under gorun it keeps the
// rendezvous client to watch the launcher, and Shutdown leaves the
// rendezvous with it, so that a later Init starts a new round there.
// Under another launcher rank 0 serves the rendezvous only until the mesh
// is formed (by then every rank has read the peer table) and nobody keeps
// a client: a lost rank shows on the data plane, the launcher itself stops
// the rest, and a later Init on rank 0 serves a new rendezvous.
func (r *Runtime) join(ctx context.Context, plan jobenv.JoinPlan) (collective.Transport, error) {
	var srv *rendezvous.Server
	if plan.ServeAddr != "" {
		var err error
		if srv, err = serveRendezvous(r.env, plan, r.log); err != nil {
			return nil, err
		}
		defer srv.Stop()
	}
	tr, rdv, env, at, err := connect(ctx, r.env, plan, r.log)
	if err != nil {
		if srv != nil {
			srv.AbortAndLinger(err.Error()) // every rank waiting fails with this error, which names the ranks that never came
		}
		return nil, err
	}
	r.env, r.hostOf, r.machineOf, r.routeHints = env, at.hostOf, at.machineOf, plan.RouteHints
	if plan.Launcher == jobenv.LauncherGorun || plan.Launcher == "" {
		r.rdv = rdv
	} else {
		rdv.Close()
	}
	return tr, nil
}

// engineConfig builds the engine's configuration from the environment's
// knobs and opens rank 0's timeline file and, when autotuning a job of
// several ranks, its autotuning log.
func (r *Runtime) engineConfig() (engine.Config, error) {
	env := r.env
	cfg := engine.Config{Engine: env.Engine, Logger: r.log, OnStall: stallEvent(r.pub)} // stall warnings are events too
	if env.Rank != 0 {
		return cfg, nil
	}
	if env.TimelinePath != "" {
		f, err := os.Create(env.TimelinePath)
		if err != nil {
			return cfg, fmt.Errorf("hvd: timeline: %w", err)
		}
		r.timeline, cfg.Timeline = f, f
	}
	if env.Autotune && env.AutotuneLogPath != "" && env.Size > 1 {
		f, err := os.Create(env.AutotuneLogPath)
		if err != nil {
			r.closeFiles()
			return cfg, fmt.Errorf("hvd: autotune log: %w", err)
		}
		r.tuneLog, cfg.AutotuneLog = f, f
	}
	return cfg, nil
}

// closeFiles closes rank 0's timeline and autotuning log and returns the
// first error.
func (r *Runtime) closeFiles() error {
	var first error
	for _, c := range []struct {
		f    *os.File
		what string
	}{{r.timeline, "timeline"}, {r.tuneLog, "autotune log"}} {
		if c.f == nil {
			continue
		}
		if err := c.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) && first == nil {
			first = fmt.Errorf("hvd: %s: %w", c.what, err)
		}
	}
	return first
}

// watchLauncher fails the communicator when the launcher goes away.
func (r *Runtime) watchLauncher() {
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	if r.rdv != nil {
		r.rdv.Watch(ctx, 0, 0, func(err error) {
			r.log.Error("hvd: lost the launcher", "err", err)
			r.comm.Abort(fmt.Errorf("%w: %w", ErrLauncherLost, err))
			r.psets.abortAll(fmt.Errorf("%w: %w", ErrLauncherLost, err))
		})
	}
}

// Launcher names what started the job: jobenv.LauncherGorun, LauncherSlurm,
// LauncherOpenMPI, LauncherMPICH, LauncherTorchrun, LauncherCluster, or ""
// for a job of one rank that no launcher started.
func (r *Runtime) Launcher() string { return r.launcher }

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
func (r *Runtime) Env() jobenv.Env { return r.env }

// Err reports the failure that ended the runtime's communicator or engine,
// or nil; it matches hvd's sentinels as operations' errors do.
func (r *Runtime) Err() error {
	if err := r.comm.Err(); err != nil {
		return withSentinel(err)
	}
	if err := r.engine.Err(); err != nil {
		return withSentinel(err)
	}
	return nil
}

// Join tells the other ranks that this rank has run out of data: until
// every rank has joined, their sum and average all-reduces complete with
// this rank contributing zeros (an Average still divides by Size, as in
// Horovod); other operations that would need this rank fail on the ranks
// that submitted them. Join returns, on every rank, the last rank to join.
// This rank submits nothing while joined. If ctx ends first, the rank
// stays joined and a later Join waits for the same outcome. On integer
// tensors the Average rounds half to even (3 averaged with a joined rank
// is 2), where Horovod truncates; see ReduceOptions.
func (r *Runtime) Join(ctx context.Context) (lastRank int, err error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return -1, fmt.Errorf("hvd: join on rank %d: %w", r.Rank(), ErrShutdown)
	}
	last, err := r.engine.Join(ctx)
	if err != nil {
		return -1, fmt.Errorf("hvd: join on rank %d: %w", r.Rank(), withSentinel(err))
	}
	return last, nil
}

// Shutdown stops accepting operations, fails those still in flight, stops
// the engine, closes the connections (and rank 0's timeline and autotuning
// log), tells gorun's rendezvous that this rank left (so that a new
// runtime of this rank may join again: every rank's next runtime forms a
// new mesh) and returns once the runtime's goroutines are gone. It is not collective: a rank may shut
// down while others still run, and their operations then fail naming it.
// Shutdown is idempotent.
func (r *Runtime) Shutdown() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.psets.closeAll()
	r.engine.Shutdown()
	r.closeDevice()
	r.stop()
	r.pub.close(!errors.Is(r.comm.Err(), ErrLauncherLost)) // the last points, unless gorun is gone
	r.comm.Close()
	if r.rdv != nil {
		if !errors.Is(r.comm.Err(), ErrLauncherLost) {
			leave(r.rdv, r.log)
		}
		r.rdv.Close()
	}
	return r.closeFiles()
}

// Comm is the communicator under the runtime, for benchmarks and tools
// that drive collectives directly. It first waits until the engine is
// idle: no named operation in flight on any rank and no rank joined. Calls
// on it bypass the engine: make them in the same order on every rank, and
// submit no named operation until they have returned. Each of its
// operations is bounded by the job's op timeout (collective.Options.OpTimeout,
// gorun --op-timeout), as the engine's are: one that waits past it for a
// rank that stopped answering fails with a *collective.OpTimeoutError, and
// under gorun the rank it waited for is named.
func (r *Runtime) Comm() *collective.Comm {
	r.engine.Quiesce(context.Background())
	return r.comm
}

// commOptions completes the communicator's options from the job: the
// host of every rank (unless opts names them), which the hierarchical
// algorithms follow, the hierarchical switch of the knobs, the
// halving-doubling all-reduce where every link is TCP (see halvingBytes),
// the smaller segments of ranks on several hosts (see segmentBytes), and
// the op timeout, which bounds the operations that programs run on Comm
// directly as the engine bounds its own. A process set's communicator
// gets the same from its ranks' hosts.
func (r *Runtime) commOptions(opts collective.Options) collective.Options {
	if opts.OpTimeout == 0 {
		opts.OpTimeout = r.env.OpTimeout
	}
	if opts.Hosts == nil && len(r.hostOf) == r.env.Size {
		opts.Hosts = hostIndexes(r.hostOf)
	}
	if opts.Hierarchical == collective.HierarchyAuto {
		opts.Hierarchical = hierarchy(r.env.Hierarchical)
	}
	if opts.HalvingBytes == 0 {
		opts.HalvingBytes = halvingBytes(r.env.NoSharedMemory, opts.Hosts)
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = segmentBytes(opts.Hosts)
	}
	return opts
}

// segmentBytes is the Options.SegmentBytes of a communicator whose ranks
// are on hosts (indexes; nil when unknown): collective's
// DefaultCrossHostSegmentBytes where they span more than one host, else
// 0 (DefaultSegmentBytes). Every rank knows every rank's host, so every
// rank cuts the same segments. Emulated hosts of internal/testlab without
// a rate limit on the 2-CPU test VM (2026-11-30), lab_bench.sh's auto
// peer against the same build with -segment 262144 (interleaved
// launches): 2 hosts × 1 rank, 2 to 64 MiB 0.58-0.83 against 1.51-1.65
// GB/s busbw (four launches each; in another run 4 to 64 MiB 0.50-0.67
// against 1.33-1.66, every launch of the smaller segment faster there),
// 1 MiB 1.83 against 1.53 and 256 KiB 1.26 against 1.15; 4 hosts × 1 rank, 1
// to 64 MiB 0.51-0.67 against 0.71-0.79, 256 KiB 0.315 against 0.302; 2
// hosts × 2 ranks (two-level) 1 MiB 0.588 against 0.637, 4 MiB 0.814
// against 0.703, 16 and 64 MiB 0.735-0.757 against 0.760-0.822 (three
// launches each). At 2 Gbit/s, 2 × 2: 1, 16 and 64 MiB 0.377, 0.340 and
// 0.349 against 0.375, 0.351 and 0.350. A plain exchange of the same
// bytes over one socket each way at once (lab_bench.sh's tcpx1) moved 16
// and 64 MiB at 0.60-0.63 GB/s where the 1 MiB segments moved 0.50-0.51:
// the large messages, not the links, were slow there. On one host (shared
// memory, or loopback TCP) the larger segments stay: they measured as
// fast or faster there (see DefaultSegmentBytes).
func segmentBytes(hosts []int) int {
	if hostCount(hosts) < 2 {
		return 0
	}
	return collective.DefaultCrossHostSegmentBytes
}

// hostCount is how many different hosts hosts names (indexes or names).
func hostCount[H cmp.Ordered](hosts []H) int {
	return len(slices.Compact(slices.Sorted(slices.Values(hosts))))
}

// halvingBytes is the Options.HalvingBytes of a communicator whose ranks
// are on hosts (indexes; nil when unknown): collective.DefaultHalvingBytes
// where every link is TCP, because shared memory is off or no two ranks
// share a host, else 0 (the ring). Both inputs are the same on every rank,
// so every rank picks the same algorithm. Medians of three interleaved
// launches on the 2-CPU test VM, ring against halving-doubling: 4 ranks
// over loopback TCP, 128 KiB 276 against 222 µs, 256 KiB 380 against 293,
// 1 MiB 807 against 774, 4 MiB 2365 against 2710; 4 emulated hosts of one
// rank each without a rate limit, 128 KiB 1454 against 835 µs, 256 KiB
// 1666 against 535, 1 MiB 2267 against 2065, 16 MiB 27.3 against 29.9 ms;
// at 2 Gbit/s 128 KiB 1633 against 894 µs, 256 KiB 1815 against 1551, 1
// MiB even. Over shared memory (4 ranks, one host) the ring was as fast or
// faster from 128 KiB to 16 MiB (512 KiB 139 against 209 µs). The limit
// went from 1 to 2 MiB once TCP links that only park made raw system
// calls: 2 MiB took 1785 against 2052 µs on the 4 emulated hosts (five
// interleaved launches of lab_bench.sh's flat and alt peers, alt adding
// -halving 8388608; at 2 Gbit/s 12.42 against 12.51 ms) and 1263 against
// 1388 µs on 4 ranks over loopback TCP (gorun -np 4 --no-shared-memory
// allreduce_bench with and without -halving 4194304, five interleaved
// launches). Beyond it they split: on
// one host halving-doubling stayed 8-9% faster at 4 and 8 MiB (2438
// against 2651 µs, 5460 against 6030), while on the emulated hosts 4 MiB
// took 3814 against 3700 µs and 8 MiB 8094 against 8108.
func halvingBytes(noSharedMemory bool, hosts []int) int {
	if len(hosts) < 3 {
		return 0
	}
	if !noSharedMemory && hostCount(hosts) != len(hosts) {
		return 0
	}
	return collective.DefaultHalvingBytes
}

// hierarchy converts the knob to the communicator's choice.
func hierarchy(s settings.Switch) collective.Hierarchy {
	switch s {
	case settings.On:
		return collective.HierarchyOn
	case settings.Off:
		return collective.HierarchyOff
	}
	return collective.HierarchyAuto
}

// knownMachines counts the different machines in machineOf that ranks
// named (see jobenv.MachineID); 0 where none did.
func knownMachines(machineOf []string) int {
	seen := make(map[string]bool)
	for _, m := range machineOf {
		if m != "" {
			seen[m] = true
		}
	}
	return len(seen)
}
