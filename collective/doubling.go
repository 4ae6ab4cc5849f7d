package collective

// RecursiveDoublingAllreduce all-reduces count elements in ceil(log2 size)
// exchanges of the whole buffer (plus one fold-in and one hand-back when
// size is not a power of two). It sends more bytes than the ring but waits
// for far fewer messages, so it wins for small buffers: at 2 ranks one
// exchange instead of the ring's two, at 16 ranks 4 instead of 30.
//
// With p the largest power of two not above size, ranks p..size-1 first
// fold their data into rank-p and get the result back at the end. In round
// d the other ranks swap buffers with rank^d and reduce. Both partners
// combine the same two operands (a⊕b on one side, b⊕a on the other), and
// the operators are commutative, so every rank ends bit-identical.
func RecursiveDoublingAllreduce(rank, size, count int) []Step {
	f, steps, done := beginFold(rank, size, count)
	if done {
		return steps
	}
	for d := 1; d < f.p; d *= 2 {
		st := noStep()
		st.SendTo, st.Send = rank^d, f.whole
		st.RecvFrom, st.Recv, st.Combine = rank^d, f.whole, Reduce
		steps = append(steps, st)
	}
	return f.back(steps)
}

// fold is how recursive doubling and halving-doubling take in the ranks
// beyond p, the largest power of two not above size: rank p+i sends its
// buffer to rank i, which reduces it in before the rounds and sends the
// result back after them.
type fold struct {
	rank, size, p int
	whole         Segment
}

// beginFold starts the schedule of rank: done is set when steps is all
// of it (nothing to reduce, or a rank beyond p: fold in, then wait for
// the result); else steps is the fold's reduction in, if any, and the
// caller appends its rounds and then f.back.
func beginFold(rank, size, count int) (f fold, steps []Step, done bool) {
	if count == 0 || size == 1 {
		return fold{}, nil, true
	}
	p := 1
	for p*2 <= size {
		p *= 2
	}
	f = fold{rank: rank, size: size, p: p, whole: Segment{Buf: BufMain, Off: 0, Len: count}}
	if rank >= p {
		return f, f.alone(), true
	}
	return f, f.in(), false
}

// alone is the whole schedule of a rank beyond p: fold in, then wait for
// the result.
func (f fold) alone() []Step {
	in, back := noStep(), noStep()
	in.SendTo, in.Send = f.rank-f.p, f.whole
	back.RecvFrom, back.Recv, back.Combine = f.rank-f.p, f.whole, Copy
	return []Step{in, back}
}

// in is the reduction of rank+p's buffer, if that rank exists.
func (f fold) in() []Step {
	if f.rank >= f.size-f.p {
		return nil
	}
	st := noStep()
	st.RecvFrom, st.Recv, st.Combine = f.rank+f.p, f.whole, Reduce
	return []Step{st}
}

// back appends the sending of the result to rank+p, if that rank exists.
func (f fold) back(steps []Step) []Step {
	if f.rank < f.size-f.p {
		st := noStep()
		st.SendTo, st.Send = f.rank+f.p, f.whole
		steps = append(steps, st)
	}
	return steps
}

// HalvingDoublingAllreduce all-reduces count elements as Rabenseifner's
// algorithm does: a reduce-scatter by recursive halving, then an
// all-gather by recursive doubling. Each rank sends and receives what the
// ring does, 2(p-1)/p of the buffer, but in 2·log2 p rounds instead of
// 2(p-1) (4 instead of 6 at 4 ranks, 8 instead of 30 at 16), so it wins
// where a round's wake-ups cost more than its bytes. Messages are cut into
// segments of at most seg elements.
//
// With p the largest power of two not above size, ranks p..size-1 first
// fold their data into rank-p and get the result back at the end, as in
// RecursiveDoublingAllreduce. The p others split the buffer into p blocks
// (block b is chunk b of an even layout). In halving round d (p/2, p/4, …,
// 1) a rank and rank^d split the blocks they still reduce: the rank whose
// bit d is clear keeps the lower half, and each sends the other the half
// it gives up and reduces the half it keeps; afterwards rank r holds block
// r fully reduced (each element reduced at one rank only, so every rank
// ends with the same bits). In doubling round d (1, 2, …, p/2) a rank and
// rank^d swap the d blocks each holds.
func HalvingDoublingAllreduce(rank, size, count, seg int) []Step {
	f, steps, done := beginFold(rank, size, count)
	if done {
		return steps
	}
	p := f.p
	l := evenLayout(count, p)
	span := func(b0, b1 int) Segment { // blocks [b0, b1)
		return Segment{Buf: BufMain, Off: l.off[b0], Len: l.off[b1-1] + l.n[b1-1] - l.off[b0]}
	}
	lo, hi := 0, p // the blocks this rank still reduces
	for d := p / 2; d >= 1; d /= 2 {
		mid := (lo + hi) / 2
		give, keep := span(mid, hi), span(lo, mid)
		if rank&d != 0 {
			give, keep = keep, give
			lo = mid
		} else {
			hi = mid
		}
		steps = swapPieces(steps, rank^d, give, keep, Reduce, seg)
	}
	for d := 1; d < p; d *= 2 {
		mine, theirs := rank&^(d-1), (rank^d)&^(d-1)
		steps = swapPieces(steps, rank^d, span(mine, mine+d), span(theirs, theirs+d), Copy, seg)
	}
	return f.back(steps)
}

// swapPieces appends the steps that send out to peer and receive in from
// it (combined with c), both cut into segments of at most seg elements,
// the j-th of each in step j.
func swapPieces(steps []Step, peer int, out, in Segment, c Combine, seg int) []Step {
	ns, nr := pieces(out.Len, seg), pieces(in.Len, seg)
	for j := range max(ns, nr) {
		st := noStep()
		if j < ns {
			off, n := partition(out.Len, ns, j)
			st.SendTo, st.Send = peer, Segment{Buf: out.Buf, Off: out.Off + off, Len: n}
		}
		if j < nr {
			off, n := partition(in.Len, nr, j)
			st.RecvFrom, st.Recv, st.Combine = peer, Segment{Buf: in.Buf, Off: in.Off + off, Len: n}, c
		}
		steps = append(steps, st)
	}
	return steps
}
