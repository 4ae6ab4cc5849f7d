// Package ps is meant to hold gorovod's parameter-server training, the
// counterpart of TensorFlow's ParameterServerStrategy: variables kept on
// parameter servers, split into row shards by a partitioner, and a
// coordinator driving the workers that read and update them. It stands
// beside package hvd, which does not import it.
//
// Of that, the package holds today the partitioners, the placement of
// variables' shards on servers, and Join, which brings a task of a job up
// (below). There are no servers, no coordinator and no training loop yet.
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
// # Joining a job
//
// Join reads this process's task from its environment
// (jobenv.DetectTask: gorun --ps, GOROVOD_PS_SERVERS under Slurm, mpirun,
// torchrun style or a GOROVOD_CLUSTER spec, or TF_CONFIG with "ps" tasks)
// and returns a Job once every task is up: the chief and the servers
// listen, everyone learns where (through the job's rendezvous, or from the
// TF_CONFIG spec), within the start timeout. Job.Close ends it.
package ps
