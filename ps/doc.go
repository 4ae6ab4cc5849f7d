// Package ps is meant to hold gorovod's parameter-server training, the
// counterpart of TensorFlow's ParameterServerStrategy: variables kept on
// parameter servers, split into row shards by a partitioner, and a
// coordinator driving the workers that read and update them. It stands
// beside package hvd, which does not import it.
//
// Of that, the package holds today only the first part: the partitioners
// and the placement of variables' shards on servers. There are no servers,
// no coordinator and no training loop yet; nothing here opens a connection
// or starts a goroutine.
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
package ps
