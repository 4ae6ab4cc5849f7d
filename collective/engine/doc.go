// Package engine runs named collective operations that ranks submit in
// any order (Horovod's tensor queue, negotiation, fusion and response
// cache) over one collective.Comm. Ranks agree each cycle, with no
// coordinator, which operations are ready everywhere, and run them in the
// same order on every rank.
//
// An Engine lets ranks submit named operations (Request) asynchronously
// and in any order, and still pay for few large collectives. Negotiation
// runs over the Comm itself; no rank coordinates. A cycle starts at once
// when a rank has new submissions (those that arrive during a cycle wait
// for the next, and are fused there), and otherwise a cycle time
// (Config.CycleTime) after the last one (see the loop). Each cycle every
// rank
//
//  1. drains its newly submitted requests;
//  2. contributes to one small all-reduce with op Min over a uint8 control
//     vector: flags (no uncached requests, idle, no stall abort), one
//     "not joined" and one "not shutting down" byte per rank, each rank's
//     payload length (its own field, 0xFF elsewhere, so Min yields it), one
//     answer code per rank (see NoAnswerError), while autotuning rank 0's
//     setting (others write 0xFF), and one bit per response-cache slot,
//     set where the request cached in that slot is pending here. Min is a
//     logical AND: a slot set on every rank is ready everywhere;
//  3. if any rank has uncached requests, all-gathers their serialized form
//     (all-gatherv, sized by step 2) into the message table that every
//     rank keeps identically;
//  4. applies the same deterministic decisions to the same data: fired
//     cache slots in slot order, then names that every non-joined rank has
//     submitted in table order, each validated across ranks (a mismatch
//     of operation, dtype, shape, op, root, scale factors or group becomes
//     an error, on every rank, that names the tensor and both values);
//  5. fuses ready all-reduces of equal dtype, op and scale factors into
//     batches of up to FusionThreshold bytes (one Comm.AllreduceVec each,
//     over the tensors where they lie: no copy into a fusion buffer and
//     back), runs the rest one by one (all-reduces of 1 MiB and more among
//     them: see soloBytes), and completes handles.
//
// This is Horovod's rank-0 coordinator with one round fewer. A name
// negotiated in full enters the response cache in the same slot on every
// rank (lowest free slot, least recently used evicted), so steady-state
// steps send only the bit vector. A name that arrives uncached while
// cached (its parameters changed on some rank, or a hit waited long
// enough that the table should see it) leaves every rank's cache, and the
// other ranks send it uncached too.
//
// When a cycle's only operation was a small all-reduce from the cache (up
// to Comm.InlineBytes: a metric, a loss, a one-gradient step), the next
// cycle's control vector carries its data: each rank that has it pending
// writes its input there, and the control all-reduce reduces that part
// with the operation's own op. If every rank had it pending, it is done
// without a collective of its own, with the same result bit for bit
// (Stats.Early); otherwise the data are dropped and it fires as usual.
// With two ranks the data travel after the vector instead, from the
// operation's own buffer, and are reduced there once both ranks said yes
// (collective.AgreeRider.Apart): no copies in and out. A
// caller that waits without a deadline runs the cycles itself (see
// Handle.Drive), so a small blocking all-reduce costs one exchange and no
// goroutine hand-off; while callers keep doing so, the engine's goroutine
// sleeps on (its timer moves with the cycles they run; Stats.Wakes).
//
// The engine negotiates only while some rank has work: a cycle in which
// every rank is idle ends it everywhere, and the next submission starts it
// again (the Comm is free for direct use in between; see Quiesce). A rank
// that has run out of data calls Join: it keeps negotiating, takes part in
// sum and average all-reduces with zeros, and Join returns once every rank
// has joined. The stall inspector reports names that some ranks submitted
// and others did not (rank 0 logs, at doubling intervals while the stall
// lasts; after StallShutdown, or OpTimeout when shorter or StallShutdown
// is 0, the rank that sees it says so in the next exchange and every rank
// fails, naming the tensors, the ranks that submitted them and those that
// did not);
// a watchdog warns about ranks that do not negotiate at all (they have
// submitted nothing, or are stopped). Each of these warnings also goes to
// Config.OnStall as a Stall of its kind, whatever the log level. The control all-reduce of step 2
// bounds each of its waits (OpTimeout, or StallShutdown when shorter): a
// rank that misses its deadline, or whose link breaks, is marked in an
// answer section of the control vector that travels on with it, so every
// rank still negotiating fails naming the same ranks (NoAnswerError). Rank
// 0 can write a Chrome-trace timeline of every tensor's negotiation and
// execution.
//
// With Config.Autotune (and more than one rank) the engine tunes itself
// while the job trains, as Horovod's autotuner does. Rank 0 divides the
// all-reduces it decides into training steps (a step ends when a name
// all-reduced in it comes again), discards 3 warm-up steps, then measures
// trials of 10 steps each, scoring each by the bytes all-reduced per
// second of those steps; the step after each change is discarded. The
// search is coordinate descent from the configured setting over the
// fusion threshold (1, 4, 16, 64, 128 MiB), the cycle time (0.5, 1, 2.5,
// 5, 10 ms), the hierarchical switch (auto, on, off: only when the Comm's
// layout runs two levels and its choice is auto) and the response cache (on, off): each value of one
// knob in turn with the best of the others so far, each setting measured
// once, 20 trials at most; then the best trial's setting stays. Rank 0
// carries the setting it asks for in the control vector of every cycle,
// so every rank applies it after the same cycle's operations (a change of
// the cache empties it everywhere; its pending hits are sent uncached),
// and the vector loses that section once rank 0 says tuning is over. Rank
// 0 logs its choice at info level and writes every trial to
// Config.AutotuneLog as CSV: trial, fusion_bytes, cycle_ms, hierarchical,
// cache, bytes, seconds, bytes_per_s, then a row "chosen" with the setting
// kept.
//
// The negotiation decides and the Engine performs. An unexported
// negotiator, a state machine in the manner of etcd raft's RawNode,
// holds everything the ranks must agree on: pending requests, cache hits,
// the message table, the response cache, held groups, the joined state
// and the stall inspector. It starts no goroutines, does no I/O and reads
// no clock: fed the submissions, the exchanged control vector and the
// gathered requests, it returns the vector to exchange with the early
// all-reduce's data that ride with it and the payload to gather (a
// proposal), what the exchange agreed (stop, gather, the early all-reduce
// it completed), and the tasks to run, planned into batches, with the
// records to log and the autotuning setting to apply (a decision; rank
// 0's tuner is pure too: it is fed bytes and durations). The Engine reads
// only these, never the negotiator's fields. The Engine owns the
// submission queue and handles, its goroutine and the watchdog, the two
// negotiation collectives, the execution of the tasks, statistics, the
// timeline, and the settings that act outside the negotiation (the Comm's
// hierarchical choice, the cycle time). Tests run several negotiators in
// lock step, combining their vectors and payloads themselves; the
// transcripts in testdata give each rank's inputs and the control vectors
// and decisions they must produce, byte for byte.
package engine
