// Package hvd is gorovod's user API: data-parallel training for Go in the
// manner of Horovod.
//
// A training program calls Init once. Under gorun, Init reads the GOROVOD_*
// environment the launcher wrote (rank, sizes, the rendezvous address and
// the job secret), registers this rank's data-plane address with the
// launcher, waits for the peer table and forms an authenticated TCP mesh.
// Without it, Init reads the variables of the launcher that started the
// process — a Slurm step (srun), Open MPI's mpirun, MPICH's mpiexec,
// torchrun-style RANK/WORLD_SIZE/MASTER_ADDR (a Kubernetes Indexed Job), or
// a GOROVOD_CLUSTER spec for a start by hand, or TF_CONFIG (Kubeflow's
// TFJob) — and rank 0 serves the
// rendezvous itself until the mesh is formed (jobenv.Detect; Launcher says
// which one). A launcher that says the job is larger than one rank but
// cannot be joined is an error, never a silent job of one rank. With no
// launcher at all the process is a job of one rank, so the same program
// runs alone or under any launcher. Init fails in a task of a
// parameter-server job (GOROVOD_PS_SERVERS, GOROVOD_ROLE=evaluator,
// TF_CONFIG with "ps" tasks; jobenv.ErrPSJob), which package ps runs; Role
// says what a process is in either kind of job ("chief", "worker", "ps",
// "evaluator"):
//
//	if err := hvd.Init(ctx); err != nil { ... }
//	defer hvd.Shutdown()
//	dev := hvd.CurrentDevice()            // the GPU of hvd.LocalRank(), or the CPU
//	grad := hvd.NewTensor("fc1/grad", g)  // named: names match tensors across ranks
//	err := hvd.Allreduce(ctx, grad, kernels.Average, hvd.ReduceOptions{})
//
// Every collective comes in two forms: XAsync returns a *Handle at once and
// Handle.Wait(ctx) waits for the outcome; X is XAsync followed by Wait.
// In-place operations (Allreduce, Broadcast) overwrite the tensor;
// AllreduceInto writes the reduction into an output tensor and leaves its
// input alone; the others (Allgather, ReduceScatter, Alltoall) return a new
// tensor as the handle's Output. GroupedAllreduce, GroupedAllgather and
// GroupedReduceScatter submit several tensors as one unit that is
// negotiated together and completes (or fails) together. A tensor must not
// be touched while its operation is in flight, and a name may have only
// one operation in flight. Ranks may
// submit their named tensors in any order: the runtime matches names across
// ranks, fuses ready all-reduces into large ones and remembers past
// negotiations (engine.Engine; the knobs are gorun's --fusion-threshold-mb,
// --cycle-time-ms, --cache-capacity, --stall-check-time, --stall-shutdown-time
// and --timeline-filename; --autotune tunes the first three, and the
// hierarchical switch, while the job trains). A rank that runs out of data
// calls Join, and the others' all-reduces go on without it until every
// rank has joined.
//
// Runtime.AddProcessSet makes a ProcessSet: a subset of the ranks with the
// same collectives, run by an engine of its own over links among its
// ranks, beside the job's collectives and other sets (Horovod's process
// sets).
//
// Tensors in GPU memory (DeviceTensor) have their own AllreduceDevice,
// BroadcastDevice and AllgatherDevice in a build with -tags cuda; they are
// staged through page-locked host memory in spans that overlap the copies
// with the network. Without that tag they fail with ErrNoCUDA.
//
// Training loops use Param (float64 or float32 values and gradients),
// SGD or Adam, and DistributedOptimizer, which all-reduces each gradient as
// soon as GradReady reports it (or hands it to a GradientHook that
// compresses it: package hvd/compress has PowerSGD and top-k);
// BroadcastParameters, Checkpointer, Shard and LRSchedule cover the rest
// of a loop.
//
// RunElastic trains a job that survives the loss of ranks (gorun
// --min-np): when one fails, the others form the job anew, roll their
// ElasticState back to its last commit, make it rank 0's and train on;
// an ElasticSampler hands the new job only the samples of the epoch not
// processed yet. (gorun cannot add hosts to a running job yet.)
//
// LogScalars publishes training code's scalars of a step (loss, accuracy,
// learning rate, samples per second) to gorun, with the runtime's own
// series (hvd/step_seconds, hvd/comm_share, bytes per kind of collective
// and per link, ...): buffered, sent every 250 ms, never blocking, dropped
// and counted when nobody listens; gorun --metrics-dir writes them to
// metrics.jsonl.
//
// Failures are global: when any rank fails (it crashes, a link breaks, a
// context is cancelled, an argument is invalid) every rank's pending and
// later operations return an error naming the operation, tensor, step,
// rank and peer. When the launcher dies, the runtime notices through its
// heartbeat and fails its operations with ErrLauncherLost. Callers branch
// on what happened with errors.Is and this package's sentinels alone
// (ErrMismatch, ErrStall, ErrJoined, ErrPeerGone, ErrInvalidArgument,
// ErrShutdown, ...), never the engine's or collective's.
//
// The package-level functions use a default Runtime, the way http.Get uses
// http.DefaultClient; tests and tools build their own with NewRuntime from
// a Config (DefaultConfig, ConfigFromEnv), and package hvdtest starts the N
// runtimes of a job in one test process. Every
// helper that takes a *Runtime (BroadcastParameters, BroadcastOptimizerState,
// BroadcastObject, AllgatherObject, AverageMetric, AverageMetrics, the plain-slice helpers
// AllreduceSlice, AverageSlice, BroadcastSlice and AllgatherSlice,
// DistributedOptimizer,
// Checkpointer.Save and Checkpointer.LoadLatest) reads a nil one as the
// default runtime, and before Init returns ErrNotInitialized.
package hvd
