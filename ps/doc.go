// Package ps is gorovod's parameter-server training, the counterpart of
// TensorFlow's ParameterServerStrategy: variables kept on parameter
// servers, split into row shards by a partitioner, and workers that pull
// them and push gradients. It stands beside package hvd, which does not
// import it.
//
// The package holds the partitioners, the placement of variables' shards
// on servers, and the parameter servers with their client (below). There
// is no coordinator or training loop here yet.
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
// (DialServers) talks to every server of the job over one authenticated
// gorpc connection each: the 32-byte job secret is proven in an HMAC
// handshake (inside TLS 1.3 keyed from the secret when TLS is set), as
// for the rendezvous. Every Pull, Push and Load is one call per server,
// carrying all of that server's shards, and the calls to different
// servers run at once. Values travel as raw little-endian float64 bytes.
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
// (WorkerID -1) never waits and is never waited for.
package ps
