// Package jobenv is the worker side of a gorovod job's contract, which the
// launcher (package runner, gorun) and the workers (package hvd) both
// import: the GOROVOD_* environment (Env), launcher detection (Detect, for
// processes started by Slurm, mpirun, torchrun, a cluster spec or
// TF_CONFIG), the elastic job's generations in the rendezvous (Generation,
// PublishGeneration, AwaitGeneration, ExchangeAddrs, Heartbeat), the
// reports a failing rank leaves for its launcher (FailedBecauseKey,
// SilentBecause), the choice of a worker's data-plane address
// (DataPlaneHost) and the name of the machine whose processors it runs on
// (MachineID). Beyond two files under /proc (MachineID) and the host's
// network interfaces and routes (DataPlaneHost), it reads only what it is
// given (getenv), and it starts no process.
//
// # The GOROVOD_* environment
//
// Env is the whole contract between gorun and its workers, and env.go the
// only place it is written (Env.Environ) and read (FromEnviron).
// Each worker gets:
//
//	GOROVOD_RANK, GOROVOD_SIZE              global rank and number of ranks
//	GOROVOD_LOCAL_RANK, GOROVOD_LOCAL_SIZE  the same on its host
//	GOROVOD_CROSS_RANK, GOROVOD_CROSS_SIZE  the same across hosts
//	GOROVOD_HOSTNAME                        its host as named in the host list
//	GOROVOD_RENDEZVOUS_ADDR                 host:port of the rendezvous service
//	GOROVOD_SECRET                          the 32-byte job secret, hex
//	GOROVOD_BIND_ADDR                       data-plane address or interface ("" = auto)
//	GOROVOD_START_TIMEOUT                   wait for all ranks to register (30s)
//
// and the tuning knobs (the fields of settings.Knobs), with their defaults
// (settings.Defaults):
//
//	GOROVOD_FUSION_THRESHOLD     bytes per fused buffer, 0 = no fusion (67108864)
//	GOROVOD_CYCLE_TIME           longest wait between negotiation cycles (1ms)
//	GOROVOD_CACHE_CAPACITY       response cache entries, 0 = no cache (1024)
//	GOROVOD_STALL_CHECK_TIME     warn about stalled tensors, 0 = never (60s)
//	GOROVOD_STALL_SHUTDOWN_TIME  abort on a stall this long, 0 = at GOROVOD_OP_TIMEOUT (0s)
//	GOROVOD_TIMELINE             timeline file ("" = none)
//	GOROVOD_LOG_LEVEL            debug, info, warn or error (info)
//	GOROVOD_OP_TIMEOUT           bound on every wait for another rank, negotiation and stalls included, 0 = none (10m)
//	GOROVOD_NO_SHARED_MEMORY     1: links between ranks on one host stay on TCP, 0: shared memory (0)
//	GOROVOD_HIERARCHICAL_ALLREDUCE  auto, on or off: two-level all-reduce, all-gather and broadcast across hosts (auto)
//	GOROVOD_AUTOTUNE             1: rank 0 tunes the knobs while the job trains, 0: off (0)
//	GOROVOD_AUTOTUNE_LOG         CSV file of the autotuner's trials ("" = none)
//	GOROVOD_TLS                  1: the rendezvous and the TCP links run inside TLS 1.3, 0: clear (0)
//
// Durations use Go syntax ("1ms", "60s", "1m30s"). Without GOROVOD_RANK a
// process is a single rank of size 1. The secret never appears on a command
// line or in a log: Env's String, Format and LogValue redact it, and
// RedactEnviron does the same for "NAME=value" lists.
//
// # Other launchers
//
// A process that gorun did not start finds its place with Detect, which
// hvd.Init calls: after the GOROVOD_* contract it tries, in order, a
// GOROVOD_CLUSTER spec (ClusterSpec: hosts, port and this process's index,
// for a start by hand, one command per process), Open MPI
// (OMPI_COMM_WORLD_*), MPICH's Hydra and Intel MPI (PMI_RANK, PMI_SIZE,
// MPI_LOCALRANKID, MPI_LOCALNRANKS), a task of a Slurm step (SLURM_PROCID,
// SLURM_STEP_NODELIST expanded by ExpandHostlist,
// SLURM_STEP_TASKS_PER_NODE by ExpandTasksPerNode), torchrun-style
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and last TensorFlow's
// TF_CONFIG (TFConfig, ParseTFConfig; GOROVOD_CLUSTER may hold one too),
// whose chief and workers form an all-reduce job: the chief is rank 0, the
// workers follow in order; an evaluator task, and a spec with "ps" tasks
// (a parameter-server job, below), are errors. Rank 0 serves the
// rendezvous at an address every rank works out the same way: the step's
// first node (Slurm), MASTER_ADDR:MASTER_PORT, the spec's first host, the
// chief's (or first worker's) TF_CONFIG address, or 127.0.0.1 when every
// rank is on one host; the port is GOROVOD_RENDEZVOUS_PORT, the
// launcher's, or DerivedPort of the job id.
// Where nothing says where rank 0 is (mpirun across hosts)
// GOROVOD_RENDEZVOUS_ADDR must be set. The secret comes from
// GOROVOD_SECRET_FILE (ReadSecretFile: 64 hex digits, mode 0600, 4 KiB at
// most),
// GOROVOD_SECRET, or else is JobToken of the job id, which keeps other jobs
// out but not an attacker; rank 0 then warns. Variables that say the job
// has several ranks but cannot be joined are an ErrLauncher error naming
// the launcher and what it read.
//
// # Parameter-server jobs
//
// DetectTask reads the roles of a parameter-server job (package ps runs
// them): GOROVOD_PS_SERVERS=N under any launcher of ranks (gorun --ps N
// sets it; with Slurm, srun -n $((1+M+N)) --export=ALL,GOROVOD_PS_SERVERS=N)
// makes rank 0 the chief, ranks 1..M the workers and the last N ranks the
// parameter servers; GOROVOD_ROLE=evaluator (gorun --evaluator) marks the
// sidecar evaluator, which is not a rank; a TF_CONFIG spec with "ps" tasks
// gives each task its role by its type, with the chief's and the servers'
// listed addresses fixed. Detect refuses such an environment (ErrPSJob):
// hvd.Init joins all-reduce jobs only.
package jobenv
