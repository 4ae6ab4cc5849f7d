package collective

// members is the ring a phase runs on: size ranks, the one at position p
// being ranks[p] (or p itself when ranks is nil), and this rank at pos.
type members struct {
	ranks     []int
	size, pos int
}

// everyone is the ring of all size ranks in rank order, seen from rank.
func everyone(rank, size int) members { return members{size: size, pos: rank} }

// at returns the rank at position p (taken modulo the size).
func (m members) at(p int) int {
	p = mod(p, m.size)
	if m.ranks == nil {
		return p
	}
	return m.ranks[p]
}

// ringPhase appends size-1 rounds of a ring among m to steps; chunk c of l
// belongs to position c. In round k, this rank sends chunk (pos-k+shift) to
// its right neighbour and receives chunk (pos-k-1+shift) from its left one,
// each chunk cut into segments of at most seg elements so that several
// segments are in flight at once. With Reduce and shift -1 this is a
// reduce-scatter after which position p holds chunk p reduced; with Copy
// and shift 0, the all-gather that circulates chunk p from position p.
func ringPhase(steps []Step, m members, l layout, shift, seg int, c Combine) []Step {
	size := m.size
	right, left := m.at(m.pos+1), m.at(m.pos-1)
	for k := range size - 1 {
		sc, rc := mod(m.pos-k+shift, size), mod(m.pos-k-1+shift, size)
		ns, nr := pieces(l.n[sc], seg), pieces(l.n[rc], seg)
		for j := range max(ns, nr) {
			st := noStep()
			if j < ns {
				st.SendTo, st.Send = right, l.seg(sc, seg, j, BufMain)
			}
			if j < nr {
				st.RecvFrom, st.Recv, st.Combine = left, l.seg(rc, seg, j, BufMain), c
			}
			steps = append(steps, st)
		}
	}
	return steps
}

// RingAllreduce is the bandwidth-optimal ring all-reduce of count elements:
// a reduce-scatter after which rank r holds the fully reduced chunk r, then
// an all-gather that circulates the reduced chunks. Every rank sends and
// receives 2(size-1)/size of the buffer.
func RingAllreduce(rank, size, count, seg int) []Step {
	l, m := evenLayout(count, size), everyone(rank, size)
	steps := ringPhase(nil, m, l, -1, seg, Reduce)
	return ringPhase(steps, m, l, 0, seg, Copy)
}

// RingReduceScatter reduces chunk i of every rank's buffer into rank i's
// chunk i, where chunk i has counts[i] elements laid out back to back.
func RingReduceScatter(rank int, counts []int, seg int) []Step {
	return ringPhase(nil, everyone(rank, len(counts)), countsLayout(counts), -1, seg, Reduce)
}

// RingAllgather circulates chunk i (counts[i] elements, laid out back to
// back) from rank i to every rank; the counts may differ per rank.
func RingAllgather(rank int, counts []int, seg int) []Step {
	return ringPhase(nil, everyone(rank, len(counts)), countsLayout(counts), 0, seg, Copy)
}
