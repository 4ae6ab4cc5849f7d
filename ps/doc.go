// Package ps is gorovod's parameter-server training, the counterpart of
// TensorFlow's ParameterServerStrategy: variables kept on parameter
// servers, split into row shards by a partitioner, and workers that pull
// them and push gradients. It stands beside package hvd, which does not
// import it.
//
// The package holds the partitioners, the placement of variables' shards
// on servers, the parameter servers with their client, the coordinator
// that schedules steps onto workers, and Run, which gives every process of
// a job its part (below).
//
// # Partitioners
//
// A Partitioner decides into how many row shards (blocks of the first
// dimension) a variable is split, from its shape and element size:
//
//   - MinSizePartitioner(minShardBytes, maxShards): as many shards as keep
//     every shard at least minShardBytes, at most maxShards. TensorFlow's
//     parameter-server tutorial takes MinSizePartitioner(256<<10, servers):
//     small variables stay whole, large ones get one shard per server.
//   - MaxSizePartitioner(maxShardBytes, maxShards): as few shards as keep
//     every shard at most maxShardBytes, at most maxShards.
//   - FixedShardsPartitioner(n): n shards.
//
// Every partitioner returns at least one shard and never more than the
// variable has rows. All three count as TensorFlow's partitioners of the
// same names do; MinSizePartitioner rounds the count up
// (ceil(bytes/minShardBytes)), so a 300 KiB variable with a 256 KiB minimum
// is split in two shards of 150 KiB.
//
// Split lays the shards out as TensorFlow does: contiguous row blocks, the
// first rows%shards of them one row longer than the rest.
//
// # Placement
//
// Place splits every variable with a partitioner and assigns each shard to
// a server, balancing bytes: shards are taken largest first (ties in the
// order of the variables, then of the shards) and each goes to the server
// holding the fewest bytes so far (ties to the lowest index). The result
// depends only on its arguments, so every process of a job that calls Place
// with the same variables computes the same placement, and the busiest and
// idlest servers differ by at most the largest shard.
//
// # Servers and clients
//
// A Server (NewServer, Start, Stop; or Serve) holds the shards that Place
// assigned to its index and applies pushed gradients to them. A Client
// (DialServers) talks to every server of the job over two authenticated
// connections each (the 32-byte job secret is proven in an HMAC handshake,
// inside TLS 1.3 keyed from the secret when TLS is set, as for the
// rendezvous): gorpc for Create, Attach, Load, Drop, Shutdown and Ping,
// and a data link for Pull and Push. The data link carries framed bytes:
// a float64 Push is written from the gradient slices themselves and a
// Pull is read into the destination slices, where gob would copy every
// message twice on each side (BenchmarkPullPush: 0.68–0.90 ms against
// 2.1–3.8 ms for a 800 KB model pushed and pulled on this project's
// 2-core machine). A client whose data link cannot be set up, or breaks,
// goes on over gorpc. Every Pull and Push is one call per server, carrying
// all of that server's shards, and the calls to different servers run at
// once. Values travel as raw little-endian float64 bytes, or float32 with
// ClientConfig.Wire (half the bytes; the servers keep float64).
//
//   - Create (the chief) places the variables with a Partitioner over
//     their shapes (as float64) and sends each server the layout, its
//     shards' initial values and the Optimizer. Creating again with the
//     same layout and optimizer changes nothing; another fails (ErrLayout).
//   - Attach (a worker) learns the layout from the servers, waiting,
//     bounded by its context, until Create has run on every one; servers
//     that disagree fail it (ErrLayout).
//   - Pull reads every variable and returns the global step: the smallest
//     of the servers' push counts, that is the number of pushes every
//     server has applied (the number of pushes made, when none is in
//     flight).
//   - Push sends one gradient per variable; each server applies its part
//     with the optimizer (SGD with momentum, or Adam with a step count per
//     shard) under each shard's lock, so concurrent pushes lose nothing.
//   - Load (the chief, restoring a checkpoint) overwrites the values and
//     the step, and zeroes the optimizer's slots.
//   - Shutdown closes every server's Done (Serve returns); Ping checks that
//     every server answers.
//
// A server checks every request against the layout before it allocates
// from it (a wrong length, an unknown or missing variable, a malformed
// layout: ErrBadRequest), and drops a connection that announces a message
// above MaxServerBytes plus room for the layout. Every failure to reach a
// server (refused, broken or timed-out connection, failed handshake, a
// stopping server) is a *ServerError naming the server's index and
// address; a call fails within ClientConfig.CallTimeout when a server
// dies.
//
// With ServerConfig.Staleness K > 0 the servers are stale-synchronous:
// each worker's pushes are its clock, and a worker's Pull waits while its
// clock exceeds the slowest active worker's by more than K. A worker
// counts from its first Pull or Push (starting at the slowest active
// clock, so a late joiner holds nobody back) until it is unheard for
// ServerConfig.OpTimeout or the chief calls Client.Drop on it; the chief
// (WorkerID -1) never waits and is never waited for. Under Run the chief
// drops a worker it lost, and a worker that asks for a step while the
// queue is empty (CoordinatorConfig.OnWorkerIdle): with nothing to run it
// cannot catch up, and a worker ahead of it would wait until the op
// timeout.
//
// # Coordinator
//
// The chief drives the workers as TensorFlow's ClusterCoordinator does, in
// Go's terms: Go cannot ship closures, so every worker registers named step
// functions (StepFunc) and the chief schedules a name and arguments
// (Coordinator.Schedule), getting a RemoteValue whose Wait returns the
// step's result. Coordinator.Join waits for every step scheduled before it
// and returns the first step error since the previous Join. Arguments and
// results are bytes, at most MaxStepBytes each.
//
// Workers (RunWorker) connect to the chief over gorpc, authenticated with
// the job secret as the rendezvous is (TLS with the job's TLS setting), and
// long-poll it for their next step: one call held up to a second answers a
// step or "nothing yet"; every call counts as a heartbeat, and a worker
// busy in a step beats every quarter of the chief's HeartbeatTimeout
// (default 10s). A worker runs one step at a time and reports its outcome.
//
// Exactly once: each step has an id. A worker whose connection breaks is
// dropped at once; one silent for HeartbeatTimeout is dropped then; the
// steps it had not reported go back to the front of the queue, for any
// worker. The first result reported for an id is the step's and later ones
// are discarded, so a step function may run twice (a dropped worker that
// finishes after all) but each RemoteValue gets one result. A worker is
// one incarnation of its index: a RunWorker with the same index that
// reaches the chief later replaces it (the old one's results are discarded
// and it ends with ErrWorkerReplaced). A worker may join at any time.
//
// A step function's error fails its RemoteValue (ErrStepFailed; an unknown
// name, ErrUnknownStep, names the worker's step functions) and the step is
// not run again. An error from a parameter server — one with a method
// PSServer() (index int, addr string) in its chain — fails the whole job:
// Coordinator.Fail, which every pending and later RemoteValue and Join
// report (ErrCoordinatorFailed), naming the server. Coordinator.Stop tells
// every worker to exit (RunWorker returns nil); a worker that cannot reach
// the chief it reached before for the heartbeat timeout gives up with
// ErrChiefUnreachable.
//
// Schedule never blocks: the queue is unbounded, since the chief bounds
// what it schedules ahead (a few steps per worker, then Join or Wait).
//
// # Running a job
//
// Run gives every process of a job its part from its environment (Join):
// a server serves until the chief shuts the servers down; a worker dials
// the servers, attaches to the variables before its first step and runs
// the steps the chief schedules (Program.Steps) until the chief stops it;
// the chief runs Program.Chief with a Chief (the Coordinator and a client
// of the servers), pinging the servers every second meanwhile so that a
// server that dies fails the coordinator, naming it, even while no step
// runs, and taking a worker the coordinator loses out of the servers'
// staleness bound (Client.Drop), so that the others do not wait for it;
// then it stops the workers and, when its loop succeeded, shuts the
// servers down. When the loop failed the servers are left to the launcher,
// which stops the job (gorun; Kubernetes for a TFJob whose chief failed),
// and a server that stopped answering is reported to gorun, which names it
// rather than the chief and kills it.
//
// # Joining a job
//
// Join reads this process's task from its environment
// (jobenv.DetectTask: gorun --ps, GOROVOD_PS_SERVERS under Slurm, mpirun,
// torchrun style or a GOROVOD_CLUSTER spec, or TF_CONFIG with "ps" tasks)
// and returns a Job once every task is up: the chief and the servers
// listen, everyone learns where (through the job's rendezvous, or from the
// TF_CONFIG spec), within the start timeout. Job.Close ends it.
package ps
