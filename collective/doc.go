// Package collective moves and reduces tensors among the ranks of a job:
// all-reduce, reduce-scatter, all-gather (with per-rank counts), broadcast,
// all-to-all (with per-peer counts) and barrier.
//
// # Layers
//
// A Transport is a full mesh of ordered, reliable, tagged links
// (memtransport in memory for tests, tcptransport over TCP for jobs); the
// transporttest package holds the conformance suite both pass.
//
// A schedule is a pure function from (rank, size, layout) to the list of
// steps one rank performs: which segment it sends to whom, which it
// receives from whom, and whether it copies or reduces what it receives.
// RingAllreduce, RecursiveDoublingAllreduce (Allreduce's choice up to
// Options.DoublingBytes), HalvingDoublingAllreduce (up to
// Options.HalvingBytes), RingReduceScatter, RingAllgather,
// ChainBroadcast, ShiftAlltoall, DisseminationBarrier and the two-level
// HierarchicalAllreduce, HierarchicalAllgather and HostOrderedBroadcast
// are the schedules; the tests run
// all ranks' schedules through a goroutine-free simulation that checks
// sends match receives, every element of an all-reduce is reduced exactly
// size-1 times, and segments cover the buffer exactly. partition is the
// one function that does chunk arithmetic.
//
// The executor runs any schedule over any transport. Small operations run
// step by step in the caller's goroutine (lowest latency). Large ones are
// cut into segments (Options.SegmentBytes) and run by three goroutines: the
// caller sends, a receiver fills scratch slots, a reducer folds them in.
// Each step waits only for the earlier steps its data depends on, so
// several segments are in flight and sending, receiving and reducing
// overlap. A ring, halving-doubling or doubling all-reduce whose links are
// Exchangers (plain TCP) runs step by step in the caller's goroutine
// instead, each step's send and receive moving together and what arrives
// reduced while the rest comes.
//
// Comm ties these together on typed buffers, in place. AllreduceVec
// all-reduces several buffers as if they lay end to end in one, where they
// lie (links that are Vectored send a message gathered from several
// buffers and receive one scattered into several); the engine fuses
// tensors with it.
//
//	ring all-reduce, 3 ranks, chunks A B C (one per rank):
//	reduce-scatter: 2 rounds, each rank sends one chunk right and
//	                reduces the chunk arriving from the left;
//	all-gather:     2 rounds circulating the reduced chunks.
//	Each rank sends and receives 2(n-1)/n of the buffer in all.
//
// # Two levels across hosts
//
// A Comm that knows each rank's host (Options.Hosts) runs two-level
// schedules where the network, not memory, is the limit
// (Options.Hierarchical, SetHierarchical):
//
//	HierarchicalAllreduce, per block of the buffer:
//	  1. reduce-scatter inside each host (m ranks, m chunks);
//	  2. all-reduce of chunk i across hosts among the ranks with local
//	     index i (one ring per local index, all at once);
//	  3. all-gather inside each host.
//	Each host sends 2(H-1)/H of the buffer across the network (H hosts),
//	where a flat ring sends 2(n-1)/n of it over the busiest link between
//	hosts: 1.5x less for 2 hosts of 2 ranks.
//
// The blocks are software-pipelined (one block's transfer across hosts
// overlaps the next block's reduce-scatter and the previous block's
// all-gather inside the hosts), and every block's in-host messages are
// about one segment, so a send inside the host never waits long enough to
// starve the network. HierarchicalAllgather exchanges each block's pieces
// across hosts among ranks with the same local index, then inside each
// host; HostOrderedBroadcast chains the hosts one after another. Two-level
// all-reduce and all-gather need the same number of ranks (at least two)
// on every host and otherwise stay flat; the host-ordered broadcast takes
// any layout. HierarchyAuto takes two levels for operations larger than
// Options.InlineBytes.
//
// AllreduceAdasum (Horovod's Adasum) is not a schedule: its coefficients
// need dot products summed between the steps, so it runs as a loop of its
// own over the Conns, with the same tags and failure rules (adasum.go
// documents the tree over the ranks it evaluates).
//
// Agree is the one operation made for the engine above this package
// (package collective/engine): a Min all-reduce of a byte vector in which
// a rank that does not answer within a deadline, or whose link breaks, is
// marked in the vector instead of hanging the others.
//
// # Tags and failures
//
// Every message carries a Tag: the operation's sequence number on the Comm
// and the message's index on its link. A receiver checks both and the
// length; anything else is a protocol error, never a silent skip.
//
// Failure is global and sticky. When an operation fails on one rank (a
// broken link, a cancelled context, an invalid argument, Abort) the Comm
// closes its transport, so the peers' pending operations fail at once too,
// each with an *OpError naming the operation, its sequence number, the
// step, the rank and the peer (and its address). Every later call returns
// an error wrapping the first cause.
package collective
