package collective

// ringPhase appends size-1 rounds of a ring to steps. In round k, rank sends
// chunk (rank-k+shift) to its right neighbour and receives chunk
// (rank-k-1+shift) from its left one, each chunk cut into segments of at most
// seg elements so that several segments are in flight at once. With Reduce
// this is the reduce-scatter half of a ring all-reduce; with Copy, the
// all-gather half.
func ringPhase(steps []Step, rank, size int, l layout, shift, seg int, c Combine) []Step {
	right, left := mod(rank+1, size), mod(rank-1, size)
	for k := range size - 1 {
		sc, rc := mod(rank-k+shift, size), mod(rank-k-1+shift, size)
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
	l := evenLayout(count, size)
	steps := ringPhase(nil, rank, size, l, -1, seg, Reduce)
	return ringPhase(steps, rank, size, l, 0, seg, Copy)
}

// RingReduceScatter reduces chunk i of every rank's buffer into rank i's
// chunk i, where chunk i has counts[i] elements laid out back to back.
func RingReduceScatter(rank int, counts []int, seg int) []Step {
	return ringPhase(nil, rank, len(counts), countsLayout(counts), -1, seg, Reduce)
}

// RingAllgather circulates chunk i (counts[i] elements, laid out back to
// back) from rank i to every rank; the counts may differ per rank.
func RingAllgather(rank int, counts []int, seg int) []Step {
	return ringPhase(nil, rank, len(counts), countsLayout(counts), 0, seg, Copy)
}
