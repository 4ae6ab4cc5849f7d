package collective

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/kernels"
)

// ReduceOptions scale the data around a reduction: every rank multiplies its
// input by Prescale before reducing and the result by Postscale after. Zero
// values mean 1. Op Average folds 1/Size into the postscale.
type ReduceOptions struct {
	Prescale, Postscale float64
}

// Factors are what Allreduce multiplies a buffer by before the reduction
// over size ranks with op (Prescale) and after it (Postscale, divided by
// size for Average), each 1 when unset.
func (o ReduceOptions) Factors(op kernels.Op, size int) (pre, post float64) {
	pre, post = o.Prescale, o.Postscale
	if pre == 0 {
		pre = 1
	}
	if post == 0 {
		post = 1
	}
	if op == kernels.Average {
		post /= float64(size)
	}
	return pre, post
}

// begin serialises an operation and hands out its sequence number, or
// reports an earlier failure.
func (c *Comm) begin(op string) (uint64, error) {
	c.mu.Lock()
	if err := c.failed(op); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	c.seq++
	return c.seq, nil
}

func (c *Comm) end() { c.mu.Unlock() }

// call is one collective operation in progress: its name and sequence
// number, which its errors and frames carry. The Comm's lock is held from
// open to end.
type call struct {
	c    *Comm
	name string
	seq  uint64
}

// open starts the collective called name on buf, a whole number of dt
// elements (Broadcast and Barrier pass bytes as kernels.U8), and returns
// their count: it waits for the operations before it, fails at once if
// the Comm failed earlier, and numbers the operation. When it returns no
// error the caller must call end.
func (c *Comm) open(name string, dt kernels.DType, buf []byte) (call, int, error) {
	seq, err := c.begin(name)
	if err != nil {
		return call{}, 0, err
	}
	x := call{c: c, name: name, seq: seq}
	n, err := x.elements(dt, buf)
	if err != nil {
		c.end()
		return call{}, 0, err
	}
	return x, n, nil
}

// run returns a run of plan p for this call, on elements of esz bytes:
// the Comm's spare one (which execute keeps after a run that succeeded),
// or a new one. Reusing it keeps an operation on a cached plan from
// allocating: the garbage of fresh runs grew the heap onto fresh pages,
// whose faults cost the first operations of a job (see
// TestSmallOpsAllocateNothing).
func (x call) run(p *plan, esz int) *run {
	r := x.c.spare
	if r == nil {
		r = new(run)
	}
	x.c.spare = nil
	r.p, r.op, r.seq, r.esz = p, x.name, x.seq, esz
	return r
}

// end lets the next operation start.
func (x call) end() { x.c.end() }

// invalid fails the Comm with an argument error of this call; format may
// use %w to keep a cause in the chain.
func (x call) invalid(format string, args ...any) error {
	return x.c.invalid(x.name, x.seq, format, args...)
}

// elements checks that buf holds a whole number of dt elements.
func (x call) elements(dt kernels.DType, buf []byte) (int, error) {
	if !dt.Valid() {
		return 0, x.invalid("%w: %v", kernels.ErrDType, dt)
	}
	if len(buf)%dt.Size() != 0 {
		return 0, x.invalid("buffer of %d bytes is not a whole number of %v elements", len(buf), dt)
	}
	return len(buf) / dt.Size(), nil
}

// checkCounts validates per-rank element counts against a buffer length.
func (x call) checkCounts(counts []int, total int) error {
	if len(counts) != x.c.Size() {
		return x.invalid("%d counts for %d ranks", len(counts), x.c.Size())
	}
	return x.checkParts(counts, total, "rank")
}

// checkParts validates the element counts of parts laid back to back in a
// buffer of total elements: none negative, their sum total. what names a
// part in the error ("rank", "tensor").
func (x call) checkParts(counts []int, total int, what string) error {
	sum := 0
	for i, n := range counts {
		if n < 0 {
			return x.invalid("count %d for %s %d", n, what, i)
		}
		sum += n
	}
	if sum != total {
		return x.invalid("%s counts add up to %d elements, buffer holds %d", what, sum, total)
	}
	return nil
}

// plan returns the cached plan for key (built with mk on a miss); a
// schedule that cannot be planned is an argument error.
func (x call) plan(key planKey, mk func() []Step) (*plan, error) {
	p, err := x.c.getPlan(key, mk)
	if err != nil {
		return nil, x.invalid("%w", err)
	}
	return p, nil
}

// scale multiplies buf's dt elements by factor before an operation; a
// buffer the kernels cannot scale is an argument error.
func (x call) scale(dt kernels.DType, buf []byte, factor float64) error {
	if err := kernels.Scale(dt, buf, factor); err != nil {
		return x.invalid("%w", err)
	}
	return nil
}

// reducer returns the reduction of dt elements with op.
func (x call) reducer(dt kernels.DType, op kernels.Op) (kernels.ReduceFunc, error) {
	red, err := kernels.Lookup(dt, op)
	if err != nil {
		return nil, x.invalid("%w", err)
	}
	return red, nil
}

func countsKey(counts []int) string {
	var b strings.Builder
	for _, n := range counts {
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(',')
	}
	return b.String()
}

func (c *Comm) segElems(esz int) int { return max(1, c.opts.SegmentBytes/esz) }

// maxBlocks bounds the blocks of a pipelined two-level collective.
const maxBlocks = 256

// blockCount is the number of blocks a pipelined two-level collective cuts
// count elements into: blocks of about per elements, so that each message
// inside a host is about one segment and fits the links' buffers, which
// keeps the in-host sends from holding up the transfers between hosts.
func blockCount(count, per int) int {
	return min(maxBlocks, max(1, (count+per-1)/per))
}

// Allreduce reduces buf element-wise across all ranks with op, in place:
// afterwards every rank holds the same result. Op kernels.Adasum, which is
// not element-wise, is AllreduceAdasum of buf as one tensor.
func (c *Comm) Allreduce(ctx context.Context, dt kernels.DType, buf []byte, op kernels.Op, o ReduceOptions) error {
	if op == kernels.Adasum {
		return c.AllreduceAdasum(ctx, dt, buf, nil, o)
	}
	x, n, err := c.open("allreduce", dt, buf)
	if err != nil {
		return err
	}
	defer x.end()
	red, err := x.reducer(dt, op)
	if err != nil {
		return err
	}
	pre, post := o.Factors(op, c.Size())
	if err := x.scale(dt, buf, pre); err != nil {
		return err
	}
	p, err := x.allreducePlan(c.allreduceKey(n, dt.Size()))
	if err != nil {
		return err
	}
	r := x.run(p, dt.Size())
	r.bufs[BufMain], r.reduce = buf, red
	if err := c.execute(ctx, r, len(buf)); err != nil {
		return err
	}
	return kernels.Scale(dt, buf, post)
}

// allreduceKey picks the algorithm by size: the two-level one where the
// hierarchy says so; recursive doubling up to Options.DoublingBytes
// (latency-bound: fewest messages), run inline up to InlineBytes;
// halving-doubling up to Options.HalvingBytes on a power of two ranks
// above 2 (the ring's bytes in fewer rounds); the ring beyond
// (bandwidth-bound). It returns the plan's key; allreduceSteps builds the
// plan it names.
func (c *Comm) allreduceKey(count, esz int) planKey {
	key := planKey{alg: algAllreduceRing, count: count, esz: esz}
	switch n := c.Size(); {
	case c.hier.twoLevel(count*esz, c.opts.InlineBytes):
		key.alg = algAllreduceHier
	case count*esz <= c.opts.DoublingBytes:
		key.alg = algAllreduceDoubling
	case count*esz <= c.opts.HalvingBytes && n > 2 && powerOfTwo(n):
		key.alg = algAllreduceHalving
	}
	return key
}

// allreducePlan returns the cached plan of key (an allreduceKey), building
// it on first use. Building goes through a closure made here, which stays
// on the stack: an all-reduce whose plan is cached allocates nothing for
// it.
func (x call) allreducePlan(key planKey) (*plan, error) {
	return x.plan(key, func() []Step { return x.c.allreduceSteps(key) })
}

// allreduceSteps is the schedule of the all-reduce that key names.
func (c *Comm) allreduceSteps(key planKey) []Step {
	count, esz := key.count, key.esz
	switch key.alg {
	case algAllreduceHier:
		hosts, seg := c.hier.hosts, c.segElems(esz)
		return HierarchicalAllreduce(c.Rank(), hosts, count, seg, blockCount(count, len(hosts[0])*seg))
	case algAllreduceDoubling:
		return RecursiveDoublingAllreduce(c.Rank(), c.Size(), count)
	case algAllreduceHalving:
		return HalvingDoublingAllreduce(c.Rank(), c.Size(), count, c.segElems(esz))
	}
	return RingAllreduce(c.Rank(), c.Size(), count, c.segElems(esz))
}

// ReduceScatter reduces buf element-wise across all ranks with op and leaves
// rank i's part of the result in chunk i of its own buf, where chunk i holds
// counts[i] elements and the chunks lie back to back (nil counts: equal
// chunks as by an even split). Other chunks of buf are left partially
// reduced.
func (c *Comm) ReduceScatter(ctx context.Context, dt kernels.DType, buf []byte, counts []int, op kernels.Op, o ReduceOptions) error {
	x, n, err := c.open("reducescatter", dt, buf)
	if err != nil {
		return err
	}
	defer x.end()
	if counts == nil {
		counts = evenLayout(n, c.Size()).n
	}
	if err := x.checkCounts(counts, n); err != nil {
		return err
	}
	red, err := x.reducer(dt, op)
	if err != nil {
		return err
	}
	pre, post := o.Factors(op, c.Size())
	if err := x.scale(dt, buf, pre); err != nil {
		return err
	}
	p, err := x.plan(planKey{alg: x.name, count: n, esz: dt.Size(), counts: countsKey(counts)}, func() []Step {
		return RingReduceScatter(c.Rank(), counts, c.segElems(dt.Size()))
	})
	if err != nil {
		return err
	}
	r := x.run(p, dt.Size())
	r.bufs[BufMain], r.reduce = buf, red
	if err := c.execute(ctx, r, len(buf)); err != nil {
		return err
	}
	own := countsLayout(counts)
	lo, hi := own.off[c.Rank()]*dt.Size(), (own.off[c.Rank()]+counts[c.Rank()])*dt.Size()
	return kernels.Scale(dt, buf[lo:hi], post)
}

// Allgather gathers chunk i from rank i into every rank's buf, in place.
// Chunk i holds counts[i] elements of dt (counts may differ per rank) and the
// chunks lie back to back; on entry each rank's own chunk must be filled.
func (c *Comm) Allgather(ctx context.Context, dt kernels.DType, buf []byte, counts []int) error {
	x, n, err := c.open("allgather", dt, buf)
	if err != nil {
		return err
	}
	defer x.end()
	if err := x.checkCounts(counts, n); err != nil {
		return err
	}
	key, mk := planKey{alg: x.name, count: n, esz: dt.Size(), counts: countsKey(counts)}, func() []Step {
		return RingAllgather(c.Rank(), counts, c.segElems(dt.Size()))
	}
	if c.hier.twoLevel(len(buf), c.opts.InlineBytes) {
		hosts, seg := c.hier.hosts, c.segElems(dt.Size())
		blocks := blockCount(slices.Max(counts), seg)
		key.alg, mk = algAllgatherHier, func() []Step { return HierarchicalAllgather(c.Rank(), hosts, counts, seg, blocks) }
	}
	p, err := x.plan(key, mk)
	if err != nil {
		return err
	}
	r := x.run(p, dt.Size())
	r.bufs[BufMain] = buf
	return c.execute(ctx, r, len(buf))
}

// Broadcast copies root's buf into every other rank's buf.
func (c *Comm) Broadcast(ctx context.Context, buf []byte, root int) error {
	x, n, err := c.open("broadcast", kernels.U8, buf)
	if err != nil {
		return err
	}
	defer x.end()
	if root < 0 || root >= c.Size() {
		return x.invalid("root %d outside [0, %d)", root, c.Size())
	}
	key, mk := planKey{alg: x.name, root: root, count: n, esz: 1}, func() []Step {
		return ChainBroadcast(c.Rank(), c.Size(), root, n, c.segElems(1))
	}
	if c.hier.hostOrdered() {
		hosts := c.hier.hosts
		key.alg, mk = "broadcast-hosts", func() []Step { return HostOrderedBroadcast(c.Rank(), hosts, root, n, c.segElems(1)) }
	}
	p, err := x.plan(key, mk)
	if err != nil {
		return err
	}
	r := x.run(p, 1)
	r.bufs[BufMain] = buf
	return c.execute(ctx, r, n)
}

// Alltoall sends block p of send (sendCounts[p] elements) to rank p and
// receives rank p's block for this rank (recvCounts[p] elements) into block
// p of recv. Blocks lie back to back; send and recv must not overlap.
func (c *Comm) Alltoall(ctx context.Context, dt kernels.DType, send []byte, sendCounts []int, recv []byte, recvCounts []int) error {
	x, ns, err := c.open("alltoall", dt, send)
	if err != nil {
		return err
	}
	defer x.end()
	nr, err := x.elements(dt, recv)
	if err != nil {
		return err
	}
	if err := x.checkCounts(sendCounts, ns); err != nil {
		return err
	}
	if err := x.checkCounts(recvCounts, nr); err != nil {
		return err
	}
	me := c.Rank()
	if sendCounts[me] != recvCounts[me] {
		return x.invalid("sends %d elements to itself but expects %d", sendCounts[me], recvCounts[me])
	}
	sl, rl, esz := countsLayout(sendCounts), countsLayout(recvCounts), dt.Size()
	copy(recv[rl.off[me]*esz:(rl.off[me]+rl.n[me])*esz], send[sl.off[me]*esz:(sl.off[me]+sl.n[me])*esz])
	key := planKey{alg: x.name, esz: esz, counts: countsKey(sendCounts) + "/" + countsKey(recvCounts)}
	p, err := x.plan(key, func() []Step { return ShiftAlltoall(me, sendCounts, recvCounts) })
	if err != nil {
		return err
	}
	r := x.run(p, esz)
	r.bufs = [2][]byte{send, recv}
	return c.execute(ctx, r, max(len(send), len(recv)))
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	x, _, err := c.open("barrier", kernels.U8, nil) // no data
	if err != nil {
		return err
	}
	defer x.end()
	p, err := x.plan(planKey{alg: x.name}, func() []Step { return DisseminationBarrier(c.Rank(), c.Size()) })
	if err != nil {
		return err
	}
	r := x.run(p, 1)
	return c.execute(ctx, r, 0)
}
