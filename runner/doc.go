// Package runner is the launcher side of gorovod: it turns a host list into
// one slot per rank, gives each worker process its environment (the
// contract of package jobenv), and starts, watches and stops the ranks of a
// job (Launch).
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
// What gorun tells each rank, and how a rank started by another launcher
// finds its place, is package jobenv's: Launch writes one jobenv.Env per
// rank (jobenv.Env.ForSlot, jobenv.Env.Environ) into its environment, and
// reads the reports that failing ranks leave in the rendezvous
// (jobenv.FailedBecauseKey) and the heartbeats of elastic workers.
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
//     (package rendezvous) on that address.
//  4. Hosts whose spawner is a HostChecker (ssh) are checked, all at once,
//     within StartTimeout; a ReachChecker (ssh) also has each host connect
//     back to its rendezvous address. A failure ends Launch before any
//     rank starts; a host that cannot connect back is a *ConnectBackError
//     that names it, the address and the flags --bind-addr and
//     --network-interface.
//  5. Each rank starts, in rank order, with the job's jobenv.Env for its slot
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
// through the rendezvous before they exit (jobenv.FailedBecauseKey). Launch waits
// up to 0.5 s after the first failure, or until every rank has ended, then
// prefers a rank killed by a signal, then any other failure, over ranks
// that blamed a peer, and the earliest among equals; if every failure so
// far blamed a peer, it waits up to 3 s for the one they blamed. When
// ranks report that a rank did not answer them within their op timeout or
// stall shutdown time (it is stopped or hung; see jobenv.SilentBecause), Launch
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
// # Parameter-server jobs
//
// With Config.PS = N (gorun --ps N) the job is a parameter-server job of
// a chief, NP workers and N servers, 1+NP+N ranks of the same program,
// each with GOROVOD_PS_SERVERS=N (rank 0 the chief, the last N ranks the
// servers; see jobenv.DetectTask). AssignPS places them: the servers and
// workers take slots, the servers first, spread one per host in turn, the
// workers then filling the free slots in host order; the chief runs on the
// first host without taking a slot, and so does the evaluator
// (Config.Evaluator, gorun --evaluator: GOROVOD_ROLE=evaluator, no rank,
// output prefixed "[evaluator]"). Their own controller decides what an
// exit means: a worker's failure is logged and the job goes on (the chief
// re-runs its steps on the others); a server that ends before the chief,
// or a failing chief (blamed only if no server fails within the blame
// window after it), stops the job with a *TaskError naming it; after the
// chief exits 0 the others have GracePeriod to exit on their own, a
// server still running then failing the job; the evaluator gets SIGTERM
// EvaluatorTimeout (5 minutes) after the chief has ended and must exit 0.
//
// A local rank gets SIGKILL when gorun itself dies, even by SIGKILL (Linux's
// parent-death signal); processes that the rank started survive that one
// case, unless they watch the rendezvous as hvd ranks do.
package runner
