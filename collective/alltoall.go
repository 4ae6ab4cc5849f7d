package collective

// ShiftAlltoall exchanges blocks between every pair of ranks. Rank r's
// BufMain holds sendCounts[p] elements for each peer p back to back, and its
// BufOut receives recvCounts[p] elements from each peer p back to back. In
// step k rank r sends to r+k and receives from r-k, so every step pairs each
// send with a receive that its peer posts in the same step. The block a rank
// keeps for itself is copied locally by the caller.
func ShiftAlltoall(rank int, sendCounts, recvCounts []int) []Step {
	size := len(sendCounts)
	sl, rl := countsLayout(sendCounts), countsLayout(recvCounts)
	var steps []Step
	for k := 1; k < size; k++ {
		to, from := mod(rank+k, size), mod(rank-k, size)
		st := noStep()
		st.SendTo, st.Send = to, Segment{Buf: BufMain, Off: sl.off[to], Len: sl.n[to]}
		st.RecvFrom, st.Recv, st.Combine = from, Segment{Buf: BufOut, Off: rl.off[from], Len: rl.n[from]}, Copy
		steps = append(steps, st)
	}
	return steps
}

// DisseminationBarrier returns ceil(log2 size) rounds of empty messages: in
// round k rank r signals r+2^k and waits for r-2^k. After the last round
// every rank has heard, directly or transitively, from every other rank.
func DisseminationBarrier(rank, size int) []Step {
	var steps []Step
	for d := 1; d < size; d *= 2 {
		st := noStep()
		st.SendTo, st.Send = mod(rank+d, size), Segment{Buf: BufMain}
		st.RecvFrom, st.Recv, st.Combine = mod(rank-d, size), Segment{Buf: BufMain}, Copy
		steps = append(steps, st)
	}
	return steps
}
