package collective

// ChainBroadcast is a pipelined broadcast of count elements from root along
// the chain root, root+1, ..., root-1. The buffer is cut into segments of at
// most seg elements; every rank but the last forwards segment j while it
// receives segment j+1, so for large buffers the time approaches one copy of
// the buffer over one link whatever the number of ranks.
func ChainBroadcast(rank, size, root, count, seg int) []Step {
	order := make([]int, size)
	for p := range order {
		order[p] = mod(root+p, size)
	}
	return chainBroadcast(members{ranks: order, size: size, pos: mod(rank-root, size)}, count, seg)
}

// chainBroadcast is the pipelined broadcast of count elements along the
// chain of ch's positions 0, 1, ..., size-1, from the rank at position 0.
func chainBroadcast(ch members, count, seg int) []Step {
	v, size := ch.pos, ch.size
	next, prev := ch.at(v+1), ch.at(v-1)
	m := pieces(count, seg)
	var steps []Step
	for j := range m + 1 {
		st := noStep()
		if v < size-1 && v > 0 && j > 0 {
			st.SendTo, st.Send = next, segOf(count, m, j-1)
		}
		if v == 0 && j < m && size > 1 {
			st.SendTo, st.Send = next, segOf(count, m, j)
		}
		if v > 0 && j < m {
			st.RecvFrom, st.Recv, st.Combine = prev, segOf(count, m, j), Copy
		}
		if st.SendTo >= 0 || st.RecvFrom >= 0 {
			steps = append(steps, st)
		}
	}
	return steps
}

func segOf(count, m, j int) Segment {
	off, n := partition(count, m, j)
	return Segment{Buf: BufMain, Off: off, Len: n}
}
