package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective/internal/deadline"
)

// Defaults for Options. DefaultSegmentBytes: on the 2-CPU test VM, ranks in
// separate processes over loopback TCP (examples/allreduce_bench
// -segment, two sweeps, before same-host links moved to shared memory)
// reached a bus bandwidth at 64 MiB of 3.48-3.70 GB/s with 1 MiB segments
// against 2.98-3.34 with 256 KiB at n=2, and 1.75-1.79 against 1.55-1.65
// at n=4; 16 MiB gained at both, 4 MiB at n=4 only, and 256 KiB and 1 MiB
// buffers were within the noise. Fewer, larger messages mean fewer
// wake-ups of the sending, receiving and reducing goroutines.
//
// DefaultHalvingBytes is the Options.HalvingBytes that package hvd sets
// where every link of a job is TCP, and DefaultCrossHostSegmentBytes the
// Options.SegmentBytes it sets where the ranks span more than one host
// (see there for the measurements).
const (
	DefaultSegmentBytes          = 1 << 20
	DefaultInlineBytes           = 32 << 10
	DefaultHalvingBytes          = 2 << 20
	DefaultCrossHostSegmentBytes = 256 << 10
)

// Options tune a Comm. The zero value means the defaults.
type Options struct {
	// SegmentBytes is the largest message the pipelined executor sends;
	// large buffers are cut into segments of this size so that sending,
	// receiving and reducing overlap. Zero means DefaultSegmentBytes;
	// package hvd sets DefaultCrossHostSegmentBytes where the ranks span
	// more than one host.
	SegmentBytes int
	// InlineBytes: operations whose buffers are at most this large run
	// step by step in the caller's goroutine (lowest latency). It must stay
	// well below what the transport buffers without a reader; where a link
	// says what it buffers (a shared-memory ring, see Buffered) and a
	// plan's messages would not fit, the plan runs pipelined instead.
	InlineBytes int
	// DoublingBytes: a flat all-reduce (not two-level) of a buffer at
	// most this large, and beyond InlineBytes, runs recursive doubling
	// (log2 n exchanges of the whole buffer) rather than the ring (2(n-1)
	// steps of 1/n of it): where a step's wake-up costs more than its
	// bytes, fewer steps win. Zero means twice InlineBytes (64 KiB by
	// default). Up to InlineBytes doubling runs anyway; a value below
	// InlineBytes (a negative one too) counts as InlineBytes. On the 2-CPU
	// test VM (medians of three interleaved launches, ring against
	// doubling, 48 and 64 KiB): 4 emulated hosts of one rank, 1530 against
	// 564 and 1560 against 588 µs without a rate limit, 1579 against 593
	// and 1558 against 618 at 2 Gbit/s; 2 emulated hosts of one rank, 31.5
	// against 19.6 and 33.3 against 25.9 µs; 4 ranks over loopback TCP, 245
	// against 181 and 245 against 210 µs. A two-level all-reduce (2 × 2
	// ranks) keeps its own choice: on 2 Gbit/s links its 64 KiB took 300 µs
	// against 521 for flat doubling.
	DoublingBytes int
	// HalvingBytes: a flat all-reduce on a power of two ranks above 2, of
	// a buffer beyond DoublingBytes and at most this large, runs
	// HalvingDoublingAllreduce rather than the ring: the same bytes in
	// 2·log2 n rounds instead of 2(n-1). Zero (the default) or a negative
	// value never does (package hvd fills in a zero; see there). It pays
	// where a round costs a wake-up through the kernel, on TCP; over shared
	// memory the ring measured as fast or faster, and on 3 ranks, whose
	// third folds the whole buffer in and out, the ring was faster from 64
	// to 512 KiB (loopback TCP: 191 against 226 µs at 128 KiB). Every rank
	// must have the same value (package hvd sets DefaultHalvingBytes from
	// the job's settings, the same on every rank).
	HalvingBytes int
	// Hosts gives the host of each rank (any small integers; ranks with the
	// same number share a host); nil or a length other than the size means
	// one host per rank. It enables the hierarchical algorithms.
	Hosts []int
	// Hierarchical chooses between the flat and the two-level algorithms
	// of all-reduce, all-gather and broadcast (see Hierarchy); it can be
	// changed later with SetHierarchical.
	Hierarchical Hierarchy
	// OpTimeout, when positive, bounds each operation but Agree (whose
	// hops have limits of their own): one that has not ended this long
	// after it began, because a peer stopped answering without going away
	// (a stopped or hung process keeps its links open), fails the Comm,
	// between OpTimeout and 9/8 of it after it began, with an
	// *OpTimeoutError (wrapping ErrOpTimeout and ErrTimeout) that names the
	// peer the operation last began to wait for; its waits then end as
	// with any failure. Zero leaves operations to their contexts. It costs
	// an operation a few atomic stores, and no context (a context per
	// operation made a 4-byte all-reduce of two in-process ranks over
	// memtransport 165 ns slower, medians of five runs, in the transports'
	// watching of it): a timer that ticks every
	// OpTimeout/8 while the Comm has run an operation finds the one that
	// ran past it (see BenchmarkOpTimeout). Package hvd sets it to the
	// job's op timeout.
	OpTimeout time.Duration
}

// Hierarchy chooses how collectives run on a job that spans hosts.
type Hierarchy uint8

// The choices of Hierarchy.
const (
	// HierarchyAuto (the zero value) runs the two-level all-reduce and
	// all-gather where they were measured to be faster (across emulated
	// hosts, rate-limited or not): several hosts, the same number of ranks
	// on each (at least two), and buffers beyond the inline size; and the
	// host-ordered broadcast at any size.
	HierarchyAuto Hierarchy = iota
	// HierarchyOn runs two levels wherever the layout allows them (several
	// hosts, the same number of ranks on each), whatever the size.
	HierarchyOn
	// HierarchyOff keeps the flat algorithms over all ranks.
	HierarchyOff
)

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.InlineBytes <= 0 {
		o.InlineBytes = DefaultInlineBytes
	}
	if o.DoublingBytes == 0 {
		o.DoublingBytes = 2 * o.InlineBytes
	}
	o.DoublingBytes = max(o.DoublingBytes, o.InlineBytes)
	return o
}

// Comm runs collective operations among the ranks of a Transport. Every
// rank must call the same operations in the same order with agreeing
// arguments; operations on one Comm are serialised.
//
// Failure is global and sticky: when any operation fails on this rank (a
// broken link, a protocol error, a cancelled context, an invalid argument)
// the Comm closes its transport, which makes every peer's pending operation
// fail too, and every later call returns an error wrapping the first cause.
type Comm struct {
	t    Transport
	opts Options

	mu      sync.Mutex // serialises operations; guards the fields below
	seq     uint64
	plans   map[planKey]*plan
	scratch [][]byte
	spare   *run // a run to reuse (see call.run)
	// An Agree's message of vector and separate data (AgreeRider.Apart):
	// its parts for a Vectored link, or gathered for another.
	agreeParts  [][]byte
	agreeGather []byte
	adasumPack  []byte    // AllreduceVec's parts packed for Adasum
	lastAgree   lastAgree // the last Agree's schedule, reused while the length repeats

	failMu sync.Mutex
	cause  error

	hier hierarchy // the layout in hosts; guarded by mu
	runs [2]int    // operations executed inline and pipelined, for tests; guarded by mu

	hopsOnce sync.Once // Agree's hops, derived once (they depend on the size only)
	hops     []hop
	hopsErr  error
	hopClock deadline.Clock  // Agree's hop deadlines; used inside an operation only
	opWatch  *deadline.Watch // bounds each operation by Options.OpTimeout; nil for none
	// waitFor is 1 + the peer that the running operation last began to
	// send to or receive from (0: none yet), for an expiry to name; on a
	// cache line of its own, as every step writes it.
	_       [64]byte
	waitFor atomic.Int64
	_       [56]byte
}

// The two-level schedules, software-pipelined over blocks, order a rank's
// steps for an executor whose sends run ahead of its receives: run step by
// step, a rank may wait to receive what its peer sends only after
// receiving in turn. They never run inline (see plan.overlapped).
const (
	algAllreduceHier = "allreduce-hier"
	algAllgatherHier = "allgather-hier"
	algAllreduceRing = "allreduce-ring"
	// algAllreduceHalving is HalvingDoublingAllreduce, which Allreduce
	// runs on a power of two ranks only, where it is lockstep.
	algAllreduceHalving = "allreduce-halving"
	// algAllreduceDoubling is RecursiveDoublingAllreduce.
	algAllreduceDoubling = "allreduce-doubling"
)

type planKey struct {
	alg              string
	root, count, esz int
	counts           string // per-rank counts, for v-collectives
}

// NewComm returns a communicator over t. The Comm owns t: Close closes it.
func NewComm(t Transport, opts Options) *Comm {
	c := &Comm{t: t, opts: opts.withDefaults(), plans: map[planKey]*plan{}}
	c.hier = newHierarchy(opts.Hosts, t.Size(), opts.Hierarchical)
	if c.opts.OpTimeout > 0 {
		c.opWatch = deadline.NewWatch(c.opts.OpTimeout, c.expire)
	}
	return c
}

// SetHierarchical changes the choice of algorithms for the operations that
// start after it. Every rank must make the same change between the same
// two operations, as they agree on every other argument.
func (c *Comm) SetHierarchical(h Hierarchy) {
	c.mu.Lock()
	c.hier.mode = h
	c.mu.Unlock()
}

// Hierarchical reports the current choice (see SetHierarchical).
func (c *Comm) Hierarchical() Hierarchy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hier.mode
}

// Rank is this rank's index in [0, Size).
func (c *Comm) Rank() int { return c.t.Rank() }

// InlineBytes is Options.InlineBytes as the Comm applies it (the default
// when unset): all-reduces up to this size use recursive doubling.
func (c *Comm) InlineBytes() int { return c.opts.InlineBytes }

// OpTimeout is Options.OpTimeout: the bound on each operation, 0 for none.
func (c *Comm) OpTimeout() time.Duration { return c.opts.OpTimeout }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.t.Size() }

// Err returns the cause of the failure that ended the communicator, or nil.
func (c *Comm) Err() error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.cause
}

// Close closes the transport; later operations fail with ErrClosed.
func (c *Comm) Close() error {
	c.fail(fmt.Errorf("collective: communicator on rank %d: %w", c.Rank(), ErrClosed))
	if c.opWatch != nil {
		c.opWatch.Stop()
	}
	return nil
}

// bound runs operation seq, op, bounded by Options.OpTimeout: past it the
// Watch expires the operation (see expire), which fails the Comm with an
// *OpTimeoutError and so ends the operation's waits; op's own error, which
// then only says the transport closed, completes that error's message.
func (c *Comm) bound(seq uint64, op func() error) error {
	if c.opWatch == nil {
		return op()
	}
	c.waitFor.Store(0)
	c.opWatch.Begin(seq)
	err := op()
	if !c.opWatch.End(seq) {
		return err
	}
	// Expired: expire sets the cause (unless a failure came first) before
	// it closes the transport, and may still be on its way to it.
	cause := c.Err()
	for ; cause == nil; cause = c.Err() {
		runtime.Gosched()
	}
	var oe *OpError
	if te, ok := cause.(*OpTimeoutError); ok && te.Seq == seq && errors.As(err, &oe) {
		te.op.CompareAndSwap(nil, oe)
	}
	return cause
}

// expire fails the Comm because operation seq ran past Options.OpTimeout
// (the Watch's function): the cause names the peer it last began to wait
// for, and is in place before the transport closes.
func (c *Comm) expire(seq uint64) {
	peer := int(c.waitFor.Load()) - 1
	te := &OpTimeoutError{Limit: c.opts.OpTimeout, Rank: c.Rank(), Seq: seq, Peer: peer}
	if peer >= 0 {
		te.Host = c.t.Host(peer)
	}
	c.fail(te)
}

// waiting records that the running operation begins to wait for peer (see
// waitFor); it costs an atomic store, and nothing without OpTimeout.
func (c *Comm) waiting(peer int) {
	if c.opWatch != nil {
		c.waitFor.Store(int64(peer) + 1)
	}
}

// Abort fails the communicator with cause: every pending and later
// operation returns an error wrapping it, and the peers see this rank go.
// It is how an owner reports a failure found outside the data plane (the
// launcher died, a negotiation failed). Only the first failure is kept.
func (c *Comm) Abort(cause error) { c.fail(cause) }

// fail records the first failure and closes the transport so that every
// pending call here and on the peers returns.
func (c *Comm) fail(err error) {
	c.failMu.Lock()
	first := c.cause == nil
	if first {
		c.cause = err
	}
	c.failMu.Unlock()
	if first {
		c.t.Close()
	}
}

// failed returns the error a new operation reports after an earlier failure.
func (c *Comm) failed(op string) error {
	cause := c.Err()
	if cause == nil {
		return nil
	}
	if errors.Is(cause, ErrClosed) && !errors.As(cause, new(*OpError)) {
		return fmt.Errorf("collective: %s on rank %d: %w", op, c.Rank(), cause)
	}
	return fmt.Errorf("collective: %s on rank %d: communicator failed earlier: %w", op, c.Rank(), cause)
}

// invalid fails the communicator with an argument error, which wraps
// ErrInvalid; format may use %w to keep a cause (kernels.ErrDType,
// kernels.ErrOp, ...) in the chain too. Peers would otherwise wait forever
// for this rank's part of the operation.
func (c *Comm) invalid(op string, seq uint64, format string, args ...any) error {
	err := &OpError{Op: op, Seq: seq, Step: -1, Rank: c.Rank(), Peer: -1,
		Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
	c.fail(err)
	return err
}

// doublingExchanges reports whether a recursive-doubling all-reduce of
// size ranks counts as lockstep, so that one beyond InlineBytes over TCP
// runs on the exchange executor rather than the pipelined one: on a power
// of two ranks (no fold steps). Medians of interleaved launches on the
// 2-CPU test VM, pipelined against exchanged: 4 ranks over loopback TCP,
// 40, 48 and 64 KiB 218, 221 and 279 against 138, 130 and 180 µs; 4
// emulated hosts of one rank, 583, 585 and 636 against 458, 454 and 503
// µs. On 2 ranks the launches first varied both ways (2 emulated hosts:
// 40 KiB 18.2 against 23.2 µs, 64 KiB 38.9 against 25.1), so 2 ranks
// stayed pipelined until a later VM (2026-11-29: AMD EPYC, 1 µs per
// system call), where the pipelined executor's three goroutines per
// operation handed off between threads at every step: two ranks over
// loopback TCP, 64 KiB 163 against 109 µs (five interleaved launches).
func doublingExchanges(size int) bool { return size >= 2 && powerOfTwo(size) }

// powerOfTwo reports whether n is a power of two (n > 0).
func powerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }

// getPlan returns the cached plan for key, building it with mk on a miss.
func (c *Comm) getPlan(key planKey, mk func() []Step) (*plan, error) {
	if p, ok := c.plans[key]; ok {
		return p, nil
	}
	p, err := newPlan(mk(), c.Rank(), c.Size())
	if err != nil {
		return nil, err
	}
	p.overlapped = key.alg == algAllreduceHier || key.alg == algAllgatherHier
	p.lockstep = key.alg == algAllreduceRing || key.alg == algAllreduceHalving ||
		key.alg == algAllreduceDoubling && doublingExchanges(c.Size())
	if n := c.Size(); key.alg == algAllreduceRing && n > 2 {
		// A chunk goes in at most s messages (RingAllreduce).
		s := pieces((key.count+n-1)/n, c.segElems(key.esz))
		p.ringLead = (n-1)*s + 1
	}
	if len(c.plans) > 256 { // bound the cache: shapes in training loops repeat
		clear(c.plans)
	}
	c.plans[key] = p
	return p, nil
}

// scratchBuffers returns n buffers of at least size bytes, reused across calls.
func (c *Comm) scratchBuffers(n, size int) [][]byte {
	for len(c.scratch) < n {
		c.scratch = append(c.scratch, nil)
	}
	for i := range n {
		if cap(c.scratch[i]) < size {
			c.scratch[i] = make([]byte, size)
		}
		c.scratch[i] = c.scratch[i][:cap(c.scratch[i])]
	}
	return c.scratch[:n]
}

// execute runs plan p on bufs, inline when small, pipelined otherwise, and
// fails the communicator on error.
func (c *Comm) execute(ctx context.Context, r *run, total int) error {
	r.c = c
	err := c.bound(r.seq, func() error {
		if c.inline(r.p, r.esz, total) {
			c.runs[0]++
			return r.runInline(ctx, c.scratchBuffers(1, r.p.scratch*r.esz)[0])
		}
		c.runs[1]++
		if r.exchanges() {
			return r.runExchange(ctx, c.scratchBuffers(1, r.p.scratch*r.esz)[0])
		}
		return r.runPipelined(ctx, c.scratchBuffers(scratchSlots, r.p.scratch*r.esz))
	})
	if err != nil {
		// Report the first failure: this run's own first error, or the
		// Close or failure that interrupted it. The peers see the same.
		c.fail(err)
		return c.Err()
	}
	r.reset() // every goroutine of the run has ended
	c.spare = r
	return nil
}

// inline reports whether plan p, moving total bytes per rank, runs inline:
// within InlineBytes, on links that buffer it (see buffers), as a
// lockstep plan between two ranks on links that hold two of its messages
// (see pairBuffers), or as a ring among more on links that hold what a
// rank can run ahead (see ringBuffers).
func (c *Comm) inline(p *plan, esz, total int) bool {
	return total <= c.opts.InlineBytes && c.buffers(p, esz, true) ||
		!p.overlapped && (c.buffers(p, esz, false) || c.pairBuffers(p, esz) || c.ringBuffers(p, esz))
}

// ringBuffers reports whether p is a ring all-reduce among more than two
// ranks that can run inline on this rank: every link it sends on holds
// nothing of earlier operations and buffers p.ringLead of its largest
// messages. An inline rank then never waits in a send, whatever its
// peers run (inline or pipelined), so it cannot close a cycle of waits.
//
// Why p.ringLead = (n-1)s + 1 messages suffice, s being the most
// messages a chunk goes in: count, per link and this operation only, the
// messages a rank has sent (S) and received (R). Every message a rank
// sends in round k of the ring carries a chunk it received in round k-1,
// segment by segment, so S <= R + s on any rank (pipelined: its sender
// waits for the receive of the segment it sends; inline: S <= R + 1).
// Around the ring, rank r has received at most what r-1 sent, so R(r) <=
// S(r-1) <= R(r-1) + s <= ... <= R(r+1) + (n-1)s. Inline, r sends its
// message i after its receive i-1, so the link to r+1 then holds i+1 -
// R(r+1) <= (n-1)s + 1 of this operation's messages, and nothing of the
// earlier ones, which r+1 had read before r began (Backlogged).
//
// On the 2-CPU test VM (4 MiB rings, 1 MiB segments, four ranks on the
// two processors) this takes the 2 and 3 MiB all-reduces inline, where
// 1 MiB ran inline already (buffers) and 2 MiB took 2.4-3.4 times as long
// as 1 MiB pipelined (Open MPI's shared memory: 1.8-2.2 times).
func (c *Comm) ringBuffers(p *plan, esz int) bool {
	return p.ringLead > 0 && c.holdMessages(p, esz, p.ringLead, true)
}

// holdMessages reports whether every link that p sends on buffers k of
// its largest messages (elements of esz bytes) and would not leave them
// in this rank's memory (see InPlace), and with empty, also holds nothing
// unread now (see Backlogged).
func (c *Comm) holdMessages(p *plan, esz, k int, empty bool) bool {
	for _, l := range p.links {
		conn := c.t.Conn(l.peer)
		b, ok := conn.(Buffered)
		if !ok || b.Buffered(k) < k*p.maxMsg*esz {
			return false
		}
		if in, ok := conn.(InPlace); ok && in.SendsInPlace(p.maxMsg*esz) {
			return false // remote frames asked for (see InPlace)
		}
		if bl, ok := conn.(Backlogged); empty && (!ok || bl.Backlog() != 0) {
			return false
		}
	}
	return true
}

// pairBuffers reports whether p is a lockstep plan between two ranks (an
// all-reduce of two) whose link buffers two of its largest messages.
// Such a plan cannot wait for ever run inline, whatever its length: each
// rank sends step i's message once it has received the peer's of step
// i-1, which the peer sent after receiving this rank's of step i-2, so
// the link holds at most this rank's messages of steps i-1 and i unread
// (the previous operation's last ones are read before the peer sends its
// first of this one). A peer that runs it pipelined (its links may
// promise less) receives in a goroutine of its own, which waits only for
// its sends of earlier steps, which this rank has read.
//
// On the 2-CPU test VM (4 MiB rings, 1 MiB segments, a processor per
// rank), five interleaved launches of examples/allreduce_bench, the rule
// of buffers alone against this one, Open MPI's shared memory beside
// them:
//
//	2 MiB 654 / 390 µs (297),  4 MiB 965 / 744 (585),  16 MiB 3.81 / 2.36 ms (3.79),  64 MiB 14.1 / 12.2 ms
//
// That VM ran at two speeds; in a run mostly at the faster one, 2 MiB
// took 566 / 132 µs (171) and 4 MiB 765 / 259 (384). Between more ranks
// a rank may run further ahead of the next: see ringBuffers.
func (c *Comm) pairBuffers(p *plan, esz int) bool {
	return p.lockstep && c.Size() == 2 && c.holdMessages(p, esz, 2, false)
}

// buffers reports whether every link that p sends on buffers twice what p
// sends on it (elements of esz bytes), so that p can run inline: no send
// then waits for a peer, even with the previous operation's last messages
// still unread (a plan that only receives, like the end of a broadcast
// chain, qualifies at once). Inline execution skips the pipelined
// executor's goroutine hand-offs. Over shared memory (4 MiB rings), on the
// 2-CPU test VM, ring all-reduces ran faster inline at every size that
// fits, whether each rank had a processor or not: busbw in GB/s, three
// launches each of examples/allreduce_bench, pipelined against inline,
//
//	n=2:  64 KiB 4.3-6.1 / 8.7-10.4,  256 KiB 10.7-11.1 / 14.1-14.7,  1 MiB 12.0-13.8 / 14.6-15.0
//	n=4:  64 KiB 0.65-0.69 / 0.89-1.08,  256 KiB 1.18-1.32 / 2.05-2.45,  1 MiB 1.51-2.23 / 2.22-3.48
//
// The choice is each rank's own (its links may differ: a failed
// shared-memory handshake leaves one on TCP), which is why it only picks
// how a plan runs and never which plan: every rank must run the same
// schedule. Recursive doubling measured better still at n=4 up to 64 KiB,
// but choosing it by buffering would let ranks disagree on the algorithm.
//
// A plan within InlineBytes runs inline whatever a link that promises
// nothing (TCP, as Options.InlineBytes asks) buffers, hence unpromised:
// what such a link counts as. One that promises less than the plan needs
// (an InlineBytes set above a shared-memory ring, whose recursive
// doubling would have both ranks writing a message larger than the ring
// before either reads) makes it run pipelined instead.
func (c *Comm) buffers(p *plan, esz int, unpromised bool) bool {
	for _, l := range p.links {
		b, ok := c.t.Conn(l.peer).(Buffered)
		n := 0
		if ok {
			n = b.Buffered(2 * l.msgs)
		}
		if n < 2*l.elems*esz && (n > 0 || !unpromised) {
			return false
		}
	}
	return true
}
