package hvd

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

// The default runtime behind the package-level functions, the way
// http.Get uses http.DefaultClient. Tests build their own Runtimes.
var (
	defaultMu sync.Mutex
	defaultRT *Runtime
	kept      keptSecret // GOROVOD_SECRET as Init took it out of the environment
)

// Init joins the job that started this process and returns once every rank
// is connected, or with an error naming the ranks and hosts that never
// showed up within the start timeout. It reads the GOROVOD_* environment
// that gorun writes and, without it, the variables of the launcher that
// started the process (a Slurm step, Open MPI's mpirun, MPICH's mpiexec,
// torchrun-style RANK/WORLD_SIZE/MASTER_ADDR, a GOROVOD_CLUSTER spec, or
// TensorFlow's TF_CONFIG; see jobenv.Detect): then rank 0 serves the rendezvous itself. With
// none of them this process is a single rank of size 1; a launcher that
// says the job is larger but cannot be joined is an error, never a job of
// one rank. Rank 0 logs the launcher it found, and the runtime logs
// through slog.Default()'s handler at the level GOROVOD_LOG_LEVEL names
// (gorun's --log-level; see Config.Logger).
//
// Init removes GOROVOD_SECRET from the process's environment as soon as it
// has read it, so that no process the program starts inherits the job
// secret (the content of GOROVOD_SECRET_FILE never enters the environment;
// the variable naming the file stays). Calling Init again while the
// runtime runs is a no-op; after Shutdown, Init joins the same job again:
// it reuses the secret it took, and once every rank has done the same the
// ranks form a new mesh.
func Init(ctx context.Context) error {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultRT != nil {
		return nil
	}
	env, plan, err := detect()
	if err != nil {
		return fmt.Errorf("hvd: reading the launcher's environment: %w", err)
	}
	rt, err := NewRuntime(ctx, Config{Env: env, Plan: plan})
	if err != nil {
		return err
	}
	defaultRT = rt
	ShareProcessors(rt)
	return nil
}

// ShareProcessors sets GOMAXPROCS to the share of its host's processors
// that a rank of rt gets (see shareOfProcessors), unless the environment
// sets GOMAXPROCS, and returns it, or 0 when it left GOMAXPROCS alone.
// Init does this for the default runtime; a program that makes its one
// runtime with NewRuntime may call it.
func ShareProcessors(rt *Runtime) int {
	n := shareOfProcessors(os.Getenv("GOMAXPROCS"), startProcs(), rt.LocalSize())
	if n > 0 {
		runtime.GOMAXPROCS(n)
		rt.log.Debug("hvd: GOMAXPROCS set to this rank's share of the host's processors", "gomaxprocs", n, "local_size", rt.LocalSize())
	}
	return n
}

// startProcs is GOMAXPROCS as the process started with it (the runtime's
// default: the processors it may use, cgroup limits included), before any
// Init divided it.
var startProcs = sync.OnceValue(func() int { return runtime.GOMAXPROCS(0) })

// shareOfProcessors is the GOMAXPROCS that Init gives a rank when
// several ranks share a host and the environment does not set GOMAXPROCS:
// jobenv.GoMaxProcs of the host's processors divided among its ranks, as
// gorun gives it. It returns 0 to leave GOMAXPROCS alone. A rank then runs
// Go code on about its own share of the processors, instead of every
// rank's scheduler spinning threads on all of them.
func shareOfProcessors(env string, cpus, localSize int) int {
	if env != "" || localSize < 2 {
		return 0
	}
	return jobenv.GoMaxProcs(cpus/localSize, cpus)
}

// keptSecret is the job secret that Init took out of the environment
// (GOROVOD_SECRET, hex, as the launcher wrote it) and the job it belongs
// to, for a later Init of the same job. It is offered to no other job: a
// process whose environment names another job (a test suite, a tool that
// runs several jobs) reads that job's variables alone.
type keptSecret struct {
	value string // "" when none was taken
	job   string // jobOf the job it was read for
}

// detect reads the launcher's environment (jobenv.Detect) and takes the
// job secret out of it. GOROVOD_SECRET is removed from the process's
// environment as soon as it is read and kept in memory (kept). Without it
// in the environment, a secret kept by an earlier Init stands in for it
// if the environment still names the job it was read for (jobOf); else
// the environment is read as it is. Re-reading everything else keeps Init
// after Shutdown honest: knobs and launcher variables are read afresh.
// The caller holds defaultMu.
func detect() (jobenv.Env, jobenv.JoinPlan, error) {
	if v, ok := os.LookupEnv(jobenv.EnvSecret); ok {
		_ = os.Unsetenv(jobenv.EnvSecret) // fails only for an invalid name
		env, plan, err := jobenv.Detect(withSecret(v))
		kept = keptSecret{}
		if err == nil && v != "" {
			kept = keptSecret{value: v, job: jobOf(env, plan)}
		}
		return env, plan, err
	}
	if kept.value != "" {
		env, plan, err := jobenv.Detect(withSecret(kept.value))
		if err == nil && jobOf(env, plan) == kept.job {
			return env, plan, nil
		}
	}
	return jobenv.Detect(os.Getenv)
}

// withSecret is os.Getenv with GOROVOD_SECRET answered by secret.
func withSecret(secret string) func(string) string {
	return func(name string) string {
		if name == jobenv.EnvSecret {
			return secret
		}
		return os.Getenv(name)
	}
}

// jobOf names the job that a detected environment joins, as far as a kept
// secret is concerned: the launcher and its variables, this process's
// rank, the size and the rendezvous address.
func jobOf(env jobenv.Env, plan jobenv.JoinPlan) string {
	return fmt.Sprintf("%s %q rank %d of %d at %s", plan.Launcher, plan.Vars, env.Rank, env.Size, env.RendezvousAddr)
}

// Launcher names what started the job (see Runtime.Launcher), or "" before
// Init and for a job of one rank that no launcher started.
func Launcher() string {
	if rt := Default(); rt != nil {
		return rt.Launcher()
	}
	return ""
}

// Shutdown shuts the default runtime down; see Runtime.Shutdown. Init may
// be called again afterwards: once every rank has, they form a new mesh
// (under gorun through a new round of its rendezvous; under another
// launcher through a new rendezvous that rank 0 serves on the same port).
func Shutdown() error {
	defaultMu.Lock()
	rt := defaultRT
	defaultRT = nil
	defaultMu.Unlock()
	if rt == nil {
		return nil
	}
	return rt.Shutdown()
}

// Default returns the runtime Init created, or nil before Init.
func Default() *Runtime {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	return defaultRT
}

func info(f func(*Runtime) int) int {
	if rt := Default(); rt != nil {
		return f(rt)
	}
	return -1
}

// Rank is this process's rank, or -1 before Init.
func Rank() int { return info((*Runtime).Rank) }

// Size is the number of ranks, or -1 before Init.
func Size() int { return info((*Runtime).Size) }

// LocalRank is this rank's index on its host, or -1 before Init.
func LocalRank() int { return info((*Runtime).LocalRank) }

// LocalSize is the number of ranks on this host, or -1 before Init.
func LocalSize() int { return info((*Runtime).LocalSize) }

// CrossRank is this host's index among hosts with this LocalRank, or -1
// before Init.
func CrossRank() int { return info((*Runtime).CrossRank) }

// CrossSize is the number of hosts with this LocalRank, or -1 before Init.
func CrossSize() int { return info((*Runtime).CrossSize) }

func runtimeFor(name string) (*Runtime, *Handle) {
	rt := Default()
	if rt == nil {
		return nil, failedHandle(name, ErrNotInitialized)
	}
	return rt, nil
}

// AllreduceAsync starts an all-reduce on the default runtime.
func AllreduceAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h
	}
	return rt.AllreduceAsync(t, op, o)
}

// Allreduce all-reduces t in place on the default runtime.
func Allreduce(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) error {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h.Wait(ctx)
	}
	return rt.Allreduce(ctx, t, op, o)
}

// AllreduceIntoAsync starts an out-of-place all-reduce of in into out on
// the default runtime; see Runtime.AllreduceIntoAsync.
func AllreduceIntoAsync(in, out *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	rt, h := runtimeFor(nameOf(in))
	if rt == nil {
		return h
	}
	return rt.AllreduceIntoAsync(in, out, op, o)
}

// AllreduceInto all-reduces in into out on the default runtime, leaving in
// unchanged; see Runtime.AllreduceIntoAsync.
func AllreduceInto(ctx context.Context, in, out *Tensor, op kernels.Op, o ReduceOptions) error {
	rt, h := runtimeFor(nameOf(in))
	if rt == nil {
		return h.Wait(ctx)
	}
	return rt.AllreduceInto(ctx, in, out, op, o)
}

// BroadcastAsync starts a broadcast on the default runtime.
func BroadcastAsync(t *Tensor, root int) *Handle {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h
	}
	return rt.BroadcastAsync(t, root)
}

// Broadcast copies root's t into every rank's t.
func Broadcast(ctx context.Context, t *Tensor, root int) error {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h.Wait(ctx)
	}
	return rt.Broadcast(ctx, t, root)
}

// AllgatherAsync starts an all-gather on the default runtime.
func AllgatherAsync(t *Tensor) *Handle {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h
	}
	return rt.AllgatherAsync(t)
}

// Allgather concatenates every rank's t along the first dimension.
func Allgather(ctx context.Context, t *Tensor) (*Tensor, error) {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return nil, h.Wait(ctx)
	}
	return rt.Allgather(ctx, t)
}

// ReduceScatterAsync starts a reduce-scatter on the default runtime.
func ReduceScatterAsync(t *Tensor, op kernels.Op, o ReduceOptions) *Handle {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h
	}
	return rt.ReduceScatterAsync(t, op, o)
}

// ReduceScatter reduces t across ranks and returns this rank's share.
func ReduceScatter(ctx context.Context, t *Tensor, op kernels.Op, o ReduceOptions) (*Tensor, error) {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return nil, h.Wait(ctx)
	}
	return rt.ReduceScatter(ctx, t, op, o)
}

// AlltoallAsync starts an all-to-all on the default runtime.
func AlltoallAsync(t *Tensor, splits []int) *Handle {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return h
	}
	return rt.AlltoallAsync(t, splits)
}

// Alltoall exchanges rows of t between all ranks.
func Alltoall(ctx context.Context, t *Tensor, splits []int) (*Tensor, error) {
	rt, h := runtimeFor(nameOf(t))
	if rt == nil {
		return nil, h.Wait(ctx)
	}
	return rt.Alltoall(ctx, t, splits)
}

// GroupedAllreduceAsync all-reduces ts as one unit on the default runtime;
// see Runtime.GroupedAllreduceAsync.
func GroupedAllreduceAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	if rt := Default(); rt != nil {
		return rt.GroupedAllreduceAsync(ts, op, o)
	}
	return notInitialized(ts)
}

// GroupedAllreduce all-reduces ts in place as one unit on the default
// runtime and returns the first error.
func GroupedAllreduce(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) error {
	rt := Default()
	if rt == nil {
		return ErrNotInitialized
	}
	return rt.GroupedAllreduce(ctx, ts, op, o)
}

// GroupedAllgatherAsync all-gathers ts as one unit on the default runtime;
// see Runtime.GroupedAllgatherAsync.
func GroupedAllgatherAsync(ts []*Tensor) []*Handle {
	if rt := Default(); rt != nil {
		return rt.GroupedAllgatherAsync(ts)
	}
	return notInitialized(ts)
}

// GroupedAllgather all-gathers ts as one unit on the default runtime and
// returns the results in the order of ts.
func GroupedAllgather(ctx context.Context, ts []*Tensor) ([]*Tensor, error) {
	rt := Default()
	if rt == nil {
		return nil, ErrNotInitialized
	}
	return rt.GroupedAllgather(ctx, ts)
}

// GroupedReduceScatterAsync reduce-scatters ts as one unit on the default
// runtime; see Runtime.GroupedReduceScatterAsync.
func GroupedReduceScatterAsync(ts []*Tensor, op kernels.Op, o ReduceOptions) []*Handle {
	if rt := Default(); rt != nil {
		return rt.GroupedReduceScatterAsync(ts, op, o)
	}
	return notInitialized(ts)
}

// GroupedReduceScatter reduce-scatters ts as one unit on the default
// runtime and returns this rank's shares in the order of ts.
func GroupedReduceScatter(ctx context.Context, ts []*Tensor, op kernels.Op, o ReduceOptions) ([]*Tensor, error) {
	rt := Default()
	if rt == nil {
		return nil, ErrNotInitialized
	}
	return rt.GroupedReduceScatter(ctx, ts, op, o)
}

// notInitialized is one handle per tensor, each failed with
// ErrNotInitialized.
func notInitialized(ts []*Tensor) []*Handle {
	hs := make([]*Handle, len(ts))
	for i, t := range ts {
		hs[i] = failedHandle(nameOf(t), ErrNotInitialized)
	}
	return hs
}

// Join tells the other ranks that this rank has run out of data and
// returns the last rank to join; see Runtime.Join.
func Join(ctx context.Context) (lastRank int, err error) {
	rt := Default()
	if rt == nil {
		return -1, ErrNotInitialized
	}
	return rt.Join(ctx)
}

// Barrier waits until every rank has called Barrier.
func Barrier(ctx context.Context) error {
	rt := Default()
	if rt == nil {
		return ErrNotInitialized
	}
	return rt.Barrier(ctx)
}
