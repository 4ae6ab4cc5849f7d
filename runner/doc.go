// Package runner is the launcher side of gorovod: it turns a host list into
// one slot per rank, defines the environment through which the launcher
// (gorun) tells each worker process who it is, and starts, watches and stops
// the ranks of a job (Launch).
//
// # Host lists
//
// The -H flag takes a comma-separated list of hosts, each with an optional
// slot count (the number of ranks it may run; 1 when left out):
//
//	node1:4,node2:4
//	node1, node2:2          spaces around items are ignored
//	[::1]:2,[fe80::1%eth0]  IPv6 addresses go in brackets
//
// A host is a DNS name or IPv4 address (ASCII letters, digits, '-', '.' and
// '_'; not starting with '-' or '.'), or an IPv6 address. Slot counts are
// decimal integers from 1 to MaxSlotsPerHost. An empty item, a bad name or
// count, or a host listed twice (names compare case-insensitively) is an
// error that quotes the item; see ParseHosts.
//
// A hostfile (ReadHostfile, ParseHostfile) has the Open MPI form, one host
// per line:
//
//	# comment
//	node1 slots=4   # trailing comment
//	node2           # one slot
//	::1 slots=2     # IPv6, brackets optional here
//
// Blank lines and comments are skipped; any other line is an error giving
// its 1-based line number and text (a *HostfileError), and so are a line
// over 64 KiB and a file over 1 MiB, read no further. The file
// hostfile.example at the root of the module shows the grammar.
//
// # Rank assignment
//
// Assign places exactly np ranks: hosts are filled in the order given, each
// before the next, so global ranks are consecutive on a host. On each rank:
//
//   - LocalRank is its slot index on the host, and LocalSize the number of
//     ranks placed on that host (fewer than its slots on the last host used);
//   - CrossRank is the position of its host among the hosts that have a rank
//     with the same LocalRank, and CrossSize the number of those hosts.
//
// For example a:1,b:2 with np 3 gives a/0 (local 0/1, cross 0/2), b/1
// (local 0/2, cross 1/2), b/2 (local 1/2, cross 0/1). Asking for more ranks
// than there are slots is an error (ErrSlots) giving both numbers.
//
// # Launcher–worker environment
//
// WorkerEnv is the whole contract between gorun and its workers, and env.go
// the only place it is written (WorkerEnv.Environ) and read (FromEnviron).
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
// line or in a log: WorkerEnv's String, Format and LogValue redact it, and
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
// SLURM_STEP_TASKS_PER_NODE by ExpandTasksPerNode), and torchrun-style
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Rank 0 serves the
// rendezvous at an address every rank works out the same way: the step's
// first node (Slurm), MASTER_ADDR:MASTER_PORT, the spec's first host, or
// 127.0.0.1 when every rank is on one host; the port is
// GOROVOD_RENDEZVOUS_PORT, the launcher's, or DerivedPort of the job id.
// Where nothing says where rank 0 is (mpirun across hosts)
// GOROVOD_RENDEZVOUS_ADDR must be set. The secret comes from
// GOROVOD_SECRET_FILE (ReadSecretFile: 64 hex digits, mode 0600, 4 KiB at
// most),
// GOROVOD_SECRET, or else is JobToken of the job id, which keeps other jobs
// out but not an attacker; rank 0 then warns. Variables that say the job
// has several ranks but cannot be joined are an ErrLauncher error naming
// the launcher and what it read.
//
// Inside a Slurm allocation with no hosts given, gorun takes the
// allocation's nodes and slots (SlurmAllocation) and starts each rank as a
// step with SrunSpawner (Config.Launcher SpawnSrun), so no ssh between
// nodes is needed.
//
// # Launching a job
//
// Launch(ctx, cfg) runs one job described by a Config (start from
// DefaultConfig; Validate reports every broken invariant at once):
//
//  1. Assign places cfg.NP ranks on cfg.Hosts (localhost when empty).
//  2. The rendezvous address: BindAddr, the address of NetworkInterface,
//     127.0.0.1 when every host is local, else the local address of this
//     machine's route to the remote hosts (one address where they agree;
//     every interface, each host dialing its own route's address, where
//     they differ; see Launch).
//  3. A fresh job secret (NewSecret) and the rendezvous service
//     (runner/rendezvous) on that address.
//  4. Hosts whose spawner is a HostChecker (ssh) are checked, all at once,
//     within StartTimeout; a ReachChecker (ssh) also has each host connect
//     back to its rendezvous address. A failure ends Launch before any
//     rank starts; a host that cannot connect back is a *ConnectBackError
//     that names it, the address and the flags --bind-addr and
//     --network-interface.
//  5. Each rank starts, in rank order, with the job's WorkerEnv for its slot
//     plus the -x variables (ForwardEnv), in gorun's working directory. The
//     spawner is chosen per host: LocalSpawner for localhost, 127.0.0.1,
//     ::1 and this machine's name (IsLocalHost), ssh for the others;
//     Config.SpawnerFor replaces that choice. A remote rank gets its
//     environment, secret included, on ssh's standard input, never on a
//     command line, where other users could read it (see NewSSHSpawner).
//     The first spawn failure stops the ranks already started.
//
// Every line a rank writes reaches cfg.Stdout or cfg.Stderr whole, as
// "[R]<stdout>: text" or "[R]<stderr>: text" (an unfinished last line is
// flushed when the rank exits; lines longer than 64 KiB are cut), and, with
// OutputDir, DIR/rank.RR/stdout and DIR/rank.RR/stderr unprefixed. Verbose
// logs the placement and each command, with the secret redacted.
//
// A failed rank — a non-zero exit, death by a signal, a lost ssh
// connection — stops the job, but Launch first names the rank that failed
// on its own. Ranks often fail because another did, and hvd ranks say so
// through the rendezvous before they exit (FailedBecauseKey). Launch waits
// up to 0.5 s after the first failure, or until every rank has ended, then
// prefers a rank killed by a signal, then any other failure, over ranks
// that blamed a peer, and the earliest among equals; if every failure so
// far blamed a peer, it waits up to 3 s for the one they blamed. When
// ranks report that a rank did not answer them within their op timeout or
// stall shutdown time (it is stopped or hung; see SilentBecause), Launch
// names that rank, the one most reports name, over every failure but a
// death by a signal, as an *UnresponsiveError, and kills it at once with
// SIGKILL:
//
//	runner: rank 1 on node2 stopped answering (no answer within 2s, reported by rank 0); killed it
//
// A rank that exits, even with status 0, without registering while
// another rank has registered also stops the job. Then Launch aborts the rendezvous with the reason
// (ranks blocked in or watching it fail at once), sends SIGTERM to every
// other rank (to its whole process group), SIGKILL after GracePeriod (3 s),
// and returns an error that wraps the rank's *ExitError:
//
//	runner: rank 2 on node2 exited with status 3; stopped the other 3 ranks
//
// When ctx ends (gorun got SIGINT or SIGTERM), Launch stops every rank the
// same way and returns an error wrapping ErrInterrupted. It returns nil when
// every rank exits 0; a program that never calls hvd.Init simply runs. Ranks
// that are still waiting for each other at StartTimeout report it in
// hvd.Init, not here; but when the job then fails and a remote host's ranks
// never registered while others did, Launch names that host first, as a
// *ConnectBackError. Launch returns only after every rank is gone (or,
// after SIGKILL, 2 s more have passed), and leaves no goroutine behind.
//
// A local rank gets SIGKILL when gorun itself dies, even by SIGKILL (Linux's
// parent-death signal); processes that the rank started survive that one
// case, unless they watch the rendezvous as hvd ranks do.
package runner
