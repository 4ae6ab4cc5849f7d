package collective

import (
	"context"
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

func (o ReduceOptions) factors(op kernels.Op, size int) (pre, post float64) {
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

// elements checks that buf holds a whole number of dt elements.
func (c *Comm) elements(op string, seq uint64, dt kernels.DType, buf []byte) (int, error) {
	if !dt.Valid() {
		return 0, c.invalid(op, seq, "dtype %v", dt)
	}
	if len(buf)%dt.Size() != 0 {
		return 0, c.invalid(op, seq, "buffer of %d bytes is not a whole number of %v elements", len(buf), dt)
	}
	return len(buf) / dt.Size(), nil
}

// checkCounts validates per-rank element counts against a buffer length.
func (c *Comm) checkCounts(op string, seq uint64, counts []int, total int) error {
	if len(counts) != c.Size() {
		return c.invalid(op, seq, "%d counts for %d ranks", len(counts), c.Size())
	}
	sum := 0
	for i, n := range counts {
		if n < 0 {
			return c.invalid(op, seq, "count %d for rank %d", n, i)
		}
		sum += n
	}
	if sum != total {
		return c.invalid(op, seq, "counts add up to %d elements, buffer holds %d", sum, total)
	}
	return nil
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

// Allreduce reduces buf element-wise across all ranks with op, in place:
// afterwards every rank holds the same result.
func (c *Comm) Allreduce(ctx context.Context, dt kernels.DType, buf []byte, op kernels.Op, o ReduceOptions) error {
	const name = "allreduce"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	n, err := c.elements(name, seq, dt, buf)
	if err != nil {
		return err
	}
	red, err := kernels.Lookup(dt, op)
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	pre, post := o.factors(op, c.Size())
	if err := kernels.Scale(dt, buf, pre); err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	p, err := c.allreducePlan(n, dt.Size())
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, bufs: [2][]byte{buf}, esz: dt.Size(), reduce: red}
	if err := c.execute(ctx, r, len(buf)); err != nil {
		return err
	}
	return kernels.Scale(dt, buf, post)
}

// allreducePlan picks the algorithm by size: recursive doubling for
// buffers small enough to run inline (latency-bound: fewest messages), the
// pipelined ring otherwise (bandwidth-bound: fewest bytes per rank).
func (c *Comm) allreducePlan(count, esz int) (*plan, error) {
	if count*esz <= c.opts.InlineBytes {
		return c.getPlan(planKey{alg: "allreduce-doubling", count: count, esz: esz}, func() []Step {
			return RecursiveDoublingAllreduce(c.Rank(), c.Size(), count)
		})
	}
	return c.getPlan(planKey{alg: "allreduce-ring", count: count, esz: esz}, func() []Step {
		return RingAllreduce(c.Rank(), c.Size(), count, c.segElems(esz))
	})
}

// ReduceScatter reduces buf element-wise across all ranks with op and leaves
// rank i's part of the result in chunk i of its own buf, where chunk i holds
// counts[i] elements and the chunks lie back to back (nil counts: equal
// chunks as by an even split). Other chunks of buf are left partially
// reduced.
func (c *Comm) ReduceScatter(ctx context.Context, dt kernels.DType, buf []byte, counts []int, op kernels.Op, o ReduceOptions) error {
	const name = "reducescatter"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	n, err := c.elements(name, seq, dt, buf)
	if err != nil {
		return err
	}
	if counts == nil {
		counts = evenLayout(n, c.Size()).n
	}
	if err := c.checkCounts(name, seq, counts, n); err != nil {
		return err
	}
	red, err := kernels.Lookup(dt, op)
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	pre, post := o.factors(op, c.Size())
	if err := kernels.Scale(dt, buf, pre); err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	p, err := c.getPlan(planKey{alg: name, count: n, esz: dt.Size(), counts: countsKey(counts)}, func() []Step {
		return RingReduceScatter(c.Rank(), counts, c.segElems(dt.Size()))
	})
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, bufs: [2][]byte{buf}, esz: dt.Size(), reduce: red}
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
	const name = "allgather"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	n, err := c.elements(name, seq, dt, buf)
	if err != nil {
		return err
	}
	if err := c.checkCounts(name, seq, counts, n); err != nil {
		return err
	}
	p, err := c.getPlan(planKey{alg: name, count: n, esz: dt.Size(), counts: countsKey(counts)}, func() []Step {
		return RingAllgather(c.Rank(), counts, c.segElems(dt.Size()))
	})
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, bufs: [2][]byte{buf}, esz: dt.Size()}
	return c.execute(ctx, r, len(buf))
}

// Broadcast copies root's buf into every other rank's buf.
func (c *Comm) Broadcast(ctx context.Context, buf []byte, root int) error {
	const name = "broadcast"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	if root < 0 || root >= c.Size() {
		return c.invalid(name, seq, "root %d outside [0, %d)", root, c.Size())
	}
	p, err := c.getPlan(planKey{alg: name, root: root, count: len(buf), esz: 1}, func() []Step {
		return ChainBroadcast(c.Rank(), c.Size(), root, len(buf), c.segElems(1))
	})
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, bufs: [2][]byte{buf}, esz: 1}
	return c.execute(ctx, r, len(buf))
}

// Alltoall sends block p of send (sendCounts[p] elements) to rank p and
// receives rank p's block for this rank (recvCounts[p] elements) into block
// p of recv. Blocks lie back to back; send and recv must not overlap.
func (c *Comm) Alltoall(ctx context.Context, dt kernels.DType, send []byte, sendCounts []int, recv []byte, recvCounts []int) error {
	const name = "alltoall"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	ns, err := c.elements(name, seq, dt, send)
	if err != nil {
		return err
	}
	nr, err := c.elements(name, seq, dt, recv)
	if err != nil {
		return err
	}
	if err := c.checkCounts(name, seq, sendCounts, ns); err != nil {
		return err
	}
	if err := c.checkCounts(name, seq, recvCounts, nr); err != nil {
		return err
	}
	me := c.Rank()
	if sendCounts[me] != recvCounts[me] {
		return c.invalid(name, seq, "sends %d elements to itself but expects %d", sendCounts[me], recvCounts[me])
	}
	sl, rl, esz := countsLayout(sendCounts), countsLayout(recvCounts), dt.Size()
	copy(recv[rl.off[me]*esz:(rl.off[me]+rl.n[me])*esz], send[sl.off[me]*esz:(sl.off[me]+sl.n[me])*esz])
	key := planKey{alg: name, esz: esz, counts: countsKey(sendCounts) + "/" + countsKey(recvCounts)}
	p, err := c.getPlan(key, func() []Step { return ShiftAlltoall(me, sendCounts, recvCounts) })
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, bufs: [2][]byte{send, recv}, esz: esz}
	return c.execute(ctx, r, max(len(send), len(recv)))
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	const name = "barrier"
	seq, err := c.begin(name)
	if err != nil {
		return err
	}
	defer c.end()
	p, err := c.getPlan(planKey{alg: name}, func() []Step { return DisseminationBarrier(c.Rank(), c.Size()) })
	if err != nil {
		return c.invalid(name, seq, "%v", err)
	}
	r := &run{p: p, op: name, seq: seq, esz: 1}
	return c.execute(ctx, r, 0)
}
