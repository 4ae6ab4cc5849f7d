package collective

import (
	"context"
	"errors"
	"math/bits"

	"github.com/gorovod/gorovod/kernels"
)

// Adasum (adaptive summation, Horovod's op=Adasum) combines two vectors a
// and b as
//
//	Adasum(a, b) = (1 - a·b / (2‖a‖²))·a + (1 - a·b / (2‖b‖²))·b
//
// which is a+b for orthogonal vectors, a for a = b, and between the two
// otherwise. A zero vector's coefficient is taken as 1 (its term is zero
// whatever the coefficient, and the other's coefficient is then 1 too), so
// Adasum(0, b) = b. Horovod instead takes a coefficient of 1 whenever the
// squared norm is below 1e-8; gorovod keeps the formula down to exact zero,
// so that Adasum of small vectors is the same as of large ones, scaled.
//
// # The tree over ranks
//
// All-reducing with Adasum applies the pairwise operator along a binary
// tree over the ranks' vectors g_0 … g_{n-1}. Let p be the largest power of
// two not above n. First each rank r < n-p folds in rank r+p:
// u_r = Adasum(g_r, g_{r+p}); the other ranks below p keep u_r = g_r.
// Then the complete binary tree over u_0 … u_{p-1} in rank order: level 1
// combines (u_0, u_1), (u_2, u_3), …; level 2 combines those results in
// pairs, and so on, the lower-ranked side always the left operand. For
// n = 6 that is Adasum(Adasum(Adasum(g0, g4), Adasum(g1, g5)),
// Adasum(g2, g3)). Horovod runs Adasum on a power of two ranks only (it
// refuses any other count); the fold is gorovod's extension, and for a
// power of two the tree is Horovod's.
//
// # The algorithm
//
// The p ranks run Horovod's vector-halving, distance-doubling scheme. At
// the level of distance d = 1, 2, 4, …, rank r and its partner r^d hold
// the same range of the buffer, each its own side's partial result there;
// the lower one keeps the first half of the range and the upper one the
// second, and each sends the other the half it gives up. Each rank then
// computes, per tensor, the dot product and both squared norms over the
// part of the tensor in its half, and the 2d ranks that have been in touch
// so far sum these three numbers (recursive doubling in float64) so that
// every rank of the group holds them for the whole tensor, bit for bit the
// same; with them each rank combines its half. After the last level each
// rank holds 1/p of the result, and the levels in reverse gather it
// (each rank sends its range to the partner it split from). The extra
// ranks send their buffer to their partner before and receive the result
// after. Each rank below p sends and receives about the buffer twice,
// as a ring all-reduce does, in 2·log2(p) data messages.
//
// # Tensors
//
// Adasum is applied per tensor: counts gives the element counts of the
// tensors that lie back to back in the buffer, and each tensor's
// coefficients come from its own dot product and norms (as Horovod does
// for a fused buffer), never from the buffer as a whole.
//
// Dot products and norms are accumulated in float64 and the combination
// a·ca + b·cb is computed in float64 and rounded once to the element type.

// AllreduceAdasum all-reduces buf (float32 or float64 elements) with
// Adasum, in place: afterwards every rank holds the same result, bit for
// bit. counts lists the element counts of the tensors lying back to back
// in buf, each reduced with coefficients of its own; nil means one tensor.
// Inputs are multiplied by o.Prescale before and the result by
// o.Postscale after (there is no division by the size: Adasum of equal
// vectors is that vector). See the comment at the top of adasum.go for the
// tree over the ranks that defines the result.
func (c *Comm) AllreduceAdasum(ctx context.Context, dt kernels.DType, buf []byte, counts []int, o ReduceOptions) error {
	x, n, err := c.open("adasum", dt, buf)
	if err != nil {
		return err
	}
	defer x.end()
	return x.adasum(ctx, dt, buf, counts, n, o)
}

// adasum runs an Adasum all-reduce of buf, n elements of dt, in the open
// call x.
func (x call) adasum(ctx context.Context, dt kernels.DType, buf []byte, counts []int, n int, o ReduceOptions) error {
	if dt != kernels.F32 && dt != kernels.F64 {
		return x.invalid("%w: adasum reduces float32 and float64, not %v", kernels.ErrDType, dt)
	}
	if counts == nil {
		counts = []int{n}
	}
	if err := x.checkParts(counts, n, "tensor"); err != nil {
		return err
	}
	pre, post := o.Factors(kernels.Adasum, x.c.Size())
	if err := x.scale(dt, buf, pre); err != nil {
		return err
	}
	err := x.c.bound(x.seq, func() error {
		if dt == kernels.F32 {
			return runAdasum(ctx, x, kernels.FromBytes[float32](buf), counts)
		}
		return runAdasum(ctx, x, kernels.FromBytes[float64](buf), counts)
	})
	if err != nil {
		x.c.fail(err)
		return x.c.Err()
	}
	return kernels.Scale(dt, buf, post)
}

// adasumRun is one Adasum all-reduce in progress on one rank.
type adasumRun[T float32 | float64] struct {
	x      call
	ctx    context.Context
	v      []T   // the buffer
	recv   []T   // what a partner sends, at the same offsets as in v
	starts []int // starts[i]: the first element of tensor i; starts[len]: len(v)
	// Per tensor: the dot product and the squared norms of the left and
	// right operands, over this rank's part; and a partner's, received.
	dots, got []float64
	levels    int // log2(p)
}

// runAdasum runs the Adasum all-reduce of v, the tensors of counts lying
// back to back, among x's ranks.
func runAdasum[T float32 | float64](ctx context.Context, x call, v []T, counts []int) error {
	c := x.c
	size, rank := c.Size(), c.Rank()
	if size == 1 || len(v) == 0 {
		return nil // every rank agrees on the length: nothing to exchange
	}
	a := &adasumRun[T]{x: x, ctx: ctx, v: v}
	a.levels = bits.Len(uint(size)) - 1
	p := 1 << a.levels
	a.starts = make([]int, len(counts)+1)
	for i, k := range counts {
		a.starts[i+1] = a.starts[i] + k
	}
	nb := len(kernels.AsBytes(v))
	a.recv = kernels.FromBytes[T](c.scratchBuffers(1, nb)[0][:nb])
	a.dots = make([]float64, 3*len(counts))
	a.got = make([]float64, 3*len(counts))

	// Tags: step 0 folds the extra ranks in; level l's data exchange is
	// step 1+l·(L+1) and its l+1 sums of scalars the steps after it; the
	// gather's level l is step 1+L·(L+1)+l; the result goes back to the
	// extra ranks at step 1+L·(L+2).
	L := a.levels
	gatherBase := uint32(1 + L*(L+1))
	unfold := gatherBase + uint32(L)
	switch {
	case rank >= p: // an extra rank: its partner reduces for it
		if err := a.send(rank-p, 0, v); err != nil {
			return err
		}
		return a.receive(rank-p, unfold, v)
	case rank < size-p:
		if err := a.receive(rank+p, 0, a.recv); err != nil {
			return err
		}
		a.local()
	}
	lo, hi := 0, len(v)
	type span struct{ lo, hi int }
	kept := make([]span, L) // the range before each level's split
	for l := range L {
		d := 1 << l
		peer := rank ^ d
		kept[l] = span{lo, hi}
		mid := lo + (hi-lo)/2
		var sendLo, sendHi int
		left := rank&d == 0
		if left {
			sendLo, sendHi, hi = mid, hi, mid
		} else {
			sendLo, sendHi, lo = lo, mid, mid
		}
		step := uint32(1 + l*(L+1))
		if err := a.exchange(peer, step, v[sendLo:sendHi], a.recv[lo:hi]); err != nil {
			return err
		}
		a.partials(lo, hi, left)
		for j := range l + 1 {
			if err := a.sumScalars(rank^(1<<j), step+1+uint32(j)); err != nil {
				return err
			}
		}
		a.combine(lo, hi, left)
	}
	for l := L - 1; l >= 0; l-- {
		peer := rank ^ (1 << l)
		s := kept[l]
		var theirs []T
		if lo == s.lo { // this rank kept the first half
			theirs = a.v[hi:s.hi]
		} else {
			theirs = a.v[s.lo:lo]
		}
		if err := a.exchange(peer, gatherBase+uint32(l), v[lo:hi], theirs); err != nil {
			return err
		}
		lo, hi = s.lo, s.hi
	}
	if rank < size-p {
		return a.send(rank+p, unfold, v)
	}
	return nil
}

// coeffs returns the coefficients of the left and right operands of one
// tensor's Adasum from their dot product and squared norms.
func coeffs(dot, l2, r2 float64) (cl, cr float64) {
	cl, cr = 1, 1
	if l2 != 0 {
		cl = 1 - dot/(2*l2)
	}
	if r2 != 0 {
		cr = 1 - dot/(2*r2)
	}
	return cl, cr
}

// local folds a.recv, the whole vector of the extra rank this rank
// partners, into a.v as the right operand, tensor by tensor.
func (a *adasumRun[T]) local() {
	for i := range len(a.starts) - 1 {
		lo, hi := a.starts[i], a.starts[i+1]
		dot, l2, r2 := dotNorms(a.v[lo:hi], a.recv[lo:hi])
		cl, cr := coeffs(dot, l2, r2)
		scaledAdd(a.v[lo:hi], cl, a.recv[lo:hi], cr)
	}
}

// partials sets a.dots to the dot products and squared norms of this
// rank's range [lo, hi), per tensor: its own elements and the partner's
// received ones, the left operand's norm first.
func (a *adasumRun[T]) partials(lo, hi int, left bool) {
	clear(a.dots)
	for i := range len(a.starts) - 1 {
		tlo, thi := max(lo, a.starts[i]), min(hi, a.starts[i+1])
		if tlo >= thi {
			continue
		}
		dot, mine, theirs := dotNorms(a.v[tlo:thi], a.recv[tlo:thi])
		if !left {
			mine, theirs = theirs, mine
		}
		a.dots[3*i], a.dots[3*i+1], a.dots[3*i+2] = dot, mine, theirs
	}
}

// combine replaces this rank's range [lo, hi) of a.v with the Adasum of
// its own and the partner's elements, per tensor, from the group's sums in
// a.dots.
func (a *adasumRun[T]) combine(lo, hi int, left bool) {
	for i := range len(a.starts) - 1 {
		tlo, thi := max(lo, a.starts[i]), min(hi, a.starts[i+1])
		if tlo >= thi {
			continue
		}
		cl, cr := coeffs(a.dots[3*i], a.dots[3*i+1], a.dots[3*i+2])
		if !left {
			cl, cr = cr, cl
		}
		scaledAdd(a.v[tlo:thi], cl, a.recv[tlo:thi], cr)
	}
}

// sumScalars adds the partner's a.dots into this rank's. Both compute the
// same sums, since addition of two numbers does not depend on their order.
func (a *adasumRun[T]) sumScalars(peer int, step uint32) error {
	if err := a.x.exchange(a.ctx, peer, step, kernels.AsBytes(a.dots), kernels.AsBytes(a.got)); err != nil {
		return err
	}
	for i, g := range a.got {
		a.dots[i] += g
	}
	return nil
}

// dotNorms returns a·b, ‖a‖² and ‖b‖², accumulated in float64.
func dotNorms[T float32 | float64](a, b []T) (dot, a2, b2 float64) {
	b = b[:len(a)]
	for k, x := range a {
		p, q := float64(x), float64(b[k])
		dot += p * q
		a2 += p * p
		b2 += q * q
	}
	return dot, a2, b2
}

// scaledAdd sets a to ca·a + cb·b, computed in float64 and rounded once.
func scaledAdd[T float32 | float64](a []T, ca float64, b []T, cb float64) {
	b = b[:len(a)]
	for k, x := range a {
		a[k] = T(ca*float64(x) + cb*float64(b[k]))
	}
}

// opError wraps a failed send or receive of message step with peer.
func (x call) opError(step uint32, peer int, err error) error {
	c := x.c
	return &OpError{Op: x.name, Seq: x.seq, Step: int(step), Rank: c.Rank(), Peer: peer, Host: c.t.Host(peer), Err: err}
}

func (x call) send(ctx context.Context, peer int, step uint32, p []byte) error {
	x.c.waiting(peer)
	if err := x.c.t.Conn(peer).Send(ctx, Tag{Seq: x.seq, Step: step}, p); err != nil {
		return x.opError(step, peer, err)
	}
	return nil
}

func (x call) receive(ctx context.Context, peer int, step uint32, p []byte) error {
	x.c.waiting(peer)
	if err := x.c.t.Conn(peer).Recv(ctx, Tag{Seq: x.seq, Step: step}, p); err != nil {
		return x.opError(step, peer, err)
	}
	return nil
}

// exchange sends out to peer and receives in from it at once: both sides
// send before they receive, which must not wait on the link's buffering.
// A failure fails the Comm, which unblocks the other half (a link closed
// here is left to whoever closed it to explain, as in run.abort).
func (x call) exchange(ctx context.Context, peer int, step uint32, out, in []byte) error {
	c := x.c
	done := make(chan error, 1)
	go func() {
		err := x.send(ctx, peer, step, out)
		if err != nil && !errors.Is(err, ErrClosed) {
			c.fail(err)
		}
		done <- err
	}()
	rerr := x.receive(ctx, peer, step, in)
	if rerr != nil && !errors.Is(rerr, ErrClosed) {
		c.fail(rerr)
	}
	return firstCause(rerr, <-done)
}

func (a *adasumRun[T]) send(peer int, step uint32, p []T) error {
	return a.x.send(a.ctx, peer, step, kernels.AsBytes(p))
}

func (a *adasumRun[T]) receive(peer int, step uint32, p []T) error {
	return a.x.receive(a.ctx, peer, step, kernels.AsBytes(p))
}

func (a *adasumRun[T]) exchange(peer int, step uint32, out, in []T) error {
	return a.x.exchange(a.ctx, peer, step, kernels.AsBytes(out), kernels.AsBytes(in))
}

// allreduceVecAdasum is AllreduceVec with Adasum: the parts, one tensor
// each, are packed into one buffer, reduced and copied back.
func (c *Comm) allreduceVecAdasum(ctx context.Context, dt kernels.DType, parts [][]byte, o ReduceOptions) error {
	seq, err := c.begin("adasum")
	if err != nil {
		return err
	}
	x := call{c: c, name: "adasum", seq: seq}
	defer x.end()
	counts := make([]int, len(parts))
	n := 0
	for i, p := range parts {
		k, err := x.elements(dt, p)
		if err != nil {
			return err
		}
		counts[i] = k
		n += k
	}
	if len(parts) == 1 {
		return x.adasum(ctx, dt, parts[0], counts, n, o)
	}
	c.adasumPack = grow(c.adasumPack, n*dt.Size())
	gather(c.adasumPack, parts)
	if err := x.adasum(ctx, dt, c.adasumPack, counts, n, o); err != nil {
		return err
	}
	scatter(parts, c.adasumPack)
	return nil
}
