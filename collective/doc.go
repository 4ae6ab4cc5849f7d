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
// RingAllreduce, RingReduceScatter, RingAllgather, ChainBroadcast,
// ShiftAlltoall and DisseminationBarrier are the schedules; the tests run
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
// overlap.
//
// Comm ties these together on typed buffers, in place:
//
//	ring all-reduce, 3 ranks, chunks A B C (one per rank):
//	reduce-scatter: 2 rounds, each rank sends one chunk right and
//	                reduces the chunk arriving from the left;
//	all-gather:     2 rounds circulating the reduced chunks.
//	Each rank sends and receives 2(n-1)/n of the buffer in all.
//
// # Engine
//
// An Engine lets ranks submit named operations (Request) asynchronously
// and in any order, and still pay for few large collectives. Negotiation
// runs over the Comm itself; no rank coordinates. Each cycle
// (EngineConfig.CycleTime) every rank
//
//  1. drains its newly submitted requests;
//  2. contributes to one small all-reduce with op Min over a uint8 control
//     vector: flags (no uncached requests, idle, no stall abort), one
//     "not joined" and one "not shutting down" byte per rank, each rank's
//     payload length (its own field, 0xFF elsewhere, so Min yields it), one
//     answer code per rank (see NoAnswerError) and one bit per
//     response-cache slot, set where the request cached in that slot is
//     pending here. Min is a logical AND: a slot set on every rank is
//     ready everywhere;
//  3. if any rank has uncached requests, all-gathers their serialized form
//     (all-gatherv, sized by step 2) into the message table that every
//     rank keeps identically;
//  4. applies the same deterministic decisions to the same data: fired
//     cache slots in slot order, then names that every non-joined rank has
//     submitted in table order, each validated across ranks (a mismatch
//     of operation, dtype, shape, op, root, scale factors or group becomes
//     an error, on every rank, that names the tensor and both values);
//  5. fuses ready all-reduces of equal dtype, op and scale factors into
//     batches of up to FusionThreshold bytes (one Comm.Allreduce each over
//     a reused buffer), runs the rest one by one (all-reduces of 1 MiB and
//     more among them, in place: see soloBytes), and completes handles.
//
// This is Horovod's rank-0 coordinator with one round fewer. A name
// negotiated in full enters the response cache in the same slot on every
// rank (lowest free slot, least recently used evicted), so steady-state
// steps send only the bit vector. A name that arrives uncached while
// cached (its parameters changed on some rank, or a hit waited long
// enough that the table should see it) leaves every rank's cache, and the
// other ranks send it uncached too.
//
// The engine negotiates only while some rank has work: a cycle in which
// every rank is idle ends it everywhere, and the next submission starts it
// again (the Comm is free for direct use in between; see Quiesce). A rank
// that has run out of data calls Join: it keeps negotiating, takes part in
// sum and average all-reduces with zeros, and Join returns once every rank
// has joined. The stall inspector reports names that some ranks submitted
// and others did not (rank 0 logs; after StallShutdown every rank fails);
// a watchdog warns about ranks that do not negotiate at all (they have
// submitted nothing, or are stopped). The control all-reduce of step 2
// bounds each of its waits (OpTimeout, or StallShutdown when shorter): a
// rank that misses its deadline, or whose link breaks, is marked in an
// answer section of the control vector that travels on with it, so every
// rank still negotiating fails naming the same ranks (NoAnswerError). Rank
// 0 can write a Chrome-trace timeline of every tensor's negotiation and
// execution.
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
