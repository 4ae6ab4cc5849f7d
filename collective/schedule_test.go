package collective

import (
	"fmt"
	"math/bits"
	"testing"
)

// TestPartitionExhaustive checks that the pieces of every split cover
// [0, count) exactly, in order, with sizes differing by at most one.
func TestPartitionExhaustive(t *testing.T) {
	for count := 0; count <= 200; count++ {
		for parts := 1; parts <= 40; parts++ {
			next, lo, hi := 0, count, 0
			for i := range parts {
				off, n := partition(count, parts, i)
				if off != next || n < 0 {
					t.Fatalf("partition(%d,%d,%d) = (%d,%d), want offset %d", count, parts, i, off, n, next)
				}
				next += n
				lo, hi = min(lo, n), max(hi, n)
			}
			if next != count || hi-lo > 1 {
				t.Fatalf("partition(%d,%d): covers %d, sizes %d..%d", count, parts, next, lo, hi)
			}
		}
	}
}

func TestPieces(t *testing.T) {
	for _, c := range []struct{ n, seg, want int }{{0, 4, 0}, {1, 4, 1}, {4, 4, 1}, {5, 4, 2}, {9, 1, 9}} {
		if got := pieces(c.n, c.seg); got != c.want {
			t.Errorf("pieces(%d,%d) = %d, want %d", c.n, c.seg, got, c.want)
		}
	}
}

// sim is a goroutine-free simulation of a set of schedules. Each element of
// each rank's buffers holds the set of ranks whose input it contains
// (a bitmask); Reduce unions sets and must never add a rank twice.
type sim struct {
	size    int
	bufs    [][2][]uint32         // rank → buffer → element → contributor set
	links   map[[2]int][][]uint32 // (from,to) → FIFO of messages
	reduces [][]int               // rank → element → reductions into it
	plans   []*plan
}

func newSim(t *testing.T, size int, mk func(rank int) []Step, init func(rank int) [2][]uint32) *sim {
	t.Helper()
	s := &sim{size: size, links: map[[2]int][][]uint32{}}
	for r := range size {
		p, err := newPlan(mk(r), r, size)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		s.plans = append(s.plans, p)
		b := init(r)
		s.bufs = append(s.bufs, b)
		s.reduces = append(s.reduces, make([]int, len(b[0])))
	}
	return s
}

// run executes all schedules, each rank in step order, a rank blocking when
// the message it needs has not been sent yet. Sends are not buffered-limited.
func (s *sim) run(t *testing.T) {
	t.Helper()
	pc := make([]int, s.size)
	sentDone := make([]bool, s.size) // whether the current step's send happened
	for {
		progressed, finished := false, true
		for r := range s.size {
			for pc[r] < len(s.plans[r].steps) {
				if !s.step(t, r, pc[r], &sentDone[r]) {
					break
				}
				pc[r]++
				sentDone[r] = false
				progressed = true
			}
			if pc[r] < len(s.plans[r].steps) {
				finished = false
			}
		}
		if finished {
			break
		}
		if !progressed {
			t.Fatalf("schedules deadlock at steps %v", pc)
		}
	}
	for k, q := range s.links {
		if len(q) != 0 {
			t.Fatalf("%d messages from %d to %d never received", len(q), k[0], k[1])
		}
	}
}

func (s *sim) step(t *testing.T, r, i int, sent *bool) bool {
	st := s.plans[r].steps[i]
	if st.SendTo >= 0 && !*sent {
		msg := append([]uint32(nil), s.bufs[r][st.Send.Buf][st.Send.Off:st.Send.end()]...)
		k := [2]int{r, st.SendTo}
		s.links[k] = append(s.links[k], msg)
		*sent = true
	}
	if st.RecvFrom < 0 {
		return true
	}
	k := [2]int{st.RecvFrom, r}
	if len(s.links[k]) == 0 {
		return false
	}
	msg := s.links[k][0]
	s.links[k] = s.links[k][1:]
	if len(msg) != st.Recv.Len {
		t.Fatalf("rank %d step %d expects %d elements from %d, got %d", r, i, st.Recv.Len, st.RecvFrom, len(msg))
	}
	dst := s.bufs[r][st.Recv.Buf][st.Recv.Off:st.Recv.end()]
	for e := range dst {
		if st.Combine == Copy {
			dst[e] = msg[e]
			continue
		}
		if dst[e]&msg[e] != 0 {
			t.Fatalf("rank %d step %d: element %d reduced with overlapping contributions %b and %b", r, i, st.Recv.Off+e, dst[e], msg[e])
		}
		dst[e] |= msg[e]
		s.reduces[r][st.Recv.Off+e]++
	}
	return true
}

// checkAllreduced fails t unless every element of every rank's buffer
// holds every rank's contribution, reduced size-1 times in all.
func (s *sim) checkAllreduced(t *testing.T, count int) {
	t.Helper()
	all := uint32(1)<<s.size - 1
	for e := range count {
		total := 0
		for r := range s.size {
			if s.bufs[r][0][e] != all {
				t.Fatalf("rank %d element %d has contributions %b", r, e, s.bufs[r][0][e])
			}
			total += s.reduces[r][e]
		}
		if total != s.size-1 {
			t.Fatalf("element %d reduced %d times in all, want %d", e, total, s.size-1)
		}
	}
}

// checkGathered fails t unless every rank holds chunk c of l from rank c.
func (s *sim) checkGathered(t *testing.T, l layout) {
	t.Helper()
	for r := range s.size {
		for c := range s.size {
			for e := l.off[c]; e < l.off[c]+l.n[c]; e++ {
				if s.bufs[r][0][e] != 1<<c {
					t.Fatalf("n=%d rank %d element %d (chunk %d): %b", s.size, r, e, c, s.bufs[r][0][e])
				}
			}
		}
	}
}

// ownChunk gives rank r chunk r of l, of its own, and zeros elsewhere.
func ownChunk(l layout) func(r int) [2][]uint32 {
	total := 0
	if n := len(l.n); n > 0 {
		total = l.off[n-1] + l.n[n-1]
	}
	return func(r int) [2][]uint32 {
		b := make([]uint32, total)
		for e := l.off[r]; e < l.off[r]+l.n[r]; e++ {
			b[e] = 1 << r
		}
		return [2][]uint32{b}
	}
}

// rootOwns gives root count elements of its own and the others zeros.
func rootOwns(root, count int) func(r int) [2][]uint32 {
	return func(r int) [2][]uint32 {
		b := make([]uint32, count)
		if r == root {
			for i := range b {
				b[i] = 1 << r
			}
		}
		return [2][]uint32{b}
	}
}

func own(count int) func(r int) [2][]uint32 {
	return func(r int) [2][]uint32 {
		b := make([]uint32, count)
		for i := range b {
			b[i] = 1 << r
		}
		return [2][]uint32{b}
	}
}

var simSizes = []int{1, 2, 3, 4, 5, 7, 8, 16}

func simCounts(n int) []int { return []int{0, 1, n - 1, n + 1, 2*n + 3, 97} }

func TestRingAllreduceSchedule(t *testing.T) { simAllreduce(t, RingAllreduce) }

// simAllreduce simulates the all-reduce schedule of every rank for every
// size, count and segment of the tables above, and checks that every rank
// ends with the sum.
func simAllreduce(t *testing.T, schedule func(rank, n, count, seg int) []Step) {
	for _, n := range simSizes {
		for _, count := range simCounts(n) {
			for _, seg := range []int{1, 3, 1000} {
				t.Run(fmt.Sprintf("n%d/c%d/seg%d", n, count, seg), func(t *testing.T) {
					s := newSim(t, n, func(r int) []Step { return schedule(r, n, count, seg) }, own(count))
					s.run(t)
					s.checkAllreduced(t, count)
				})
			}
		}
	}
}

func TestRingReduceScatterSchedule(t *testing.T) {
	for _, n := range simSizes {
		counts := make([]int, n)
		total := 0
		for i := range counts {
			counts[i] = (i * 7) % 5 // includes empty chunks
			total += counts[i]
		}
		s := newSim(t, n, func(r int) []Step { return RingReduceScatter(r, counts, 2) }, own(total))
		s.run(t)
		l, all := countsLayout(counts), uint32(1)<<n-1
		for r := range n {
			for e := l.off[r]; e < l.off[r]+l.n[r]; e++ {
				if s.bufs[r][0][e] != all {
					t.Fatalf("n=%d rank %d element %d: %b", n, r, e, s.bufs[r][0][e])
				}
			}
		}
	}
}

func TestRingAllgatherSchedule(t *testing.T) {
	for _, n := range simSizes {
		counts := make([]int, n)
		for i := range counts {
			counts[i] = (i*5 + 2) % 4
		}
		l := countsLayout(counts)
		s := newSim(t, n, func(r int) []Step { return RingAllgather(r, counts, 1) }, ownChunk(l))
		s.run(t)
		s.checkGathered(t, l)
	}
}

func TestChainBroadcastSchedule(t *testing.T) {
	for _, n := range simSizes {
		for root := range n {
			for _, count := range []int{0, 1, 10} {
				s := newSim(t, n, func(r int) []Step { return ChainBroadcast(r, n, root, count, 3) }, rootOwns(root, count))
				s.run(t)
				for r := range n {
					for e := range count {
						if s.bufs[r][0][e] != 1<<root {
							t.Fatalf("n=%d root %d: rank %d element %d = %b", n, root, r, e, s.bufs[r][0][e])
						}
					}
				}
			}
		}
	}
}

func TestShiftAlltoallSchedule(t *testing.T) {
	for _, n := range simSizes {
		// rank r sends (r+p)%3 elements to p; so p receives (r+p)%3 from r.
		sendCounts := func(r int) []int {
			c := make([]int, n)
			for p := range c {
				c[p] = (r + p) % 3
			}
			return c
		}
		init := func(r int) [2][]uint32 {
			sl := countsLayout(sendCounts(r))
			in := make([]uint32, sl.off[n-1]+sl.n[n-1])
			for p := range n { // element tags the (sender, destination) pair
				for e := sl.off[p]; e < sl.off[p]+sl.n[p]; e++ {
					in[e] = uint32(r*64 + p)
				}
			}
			rl := countsLayout(sendCounts(r)) // symmetric: recvCounts == sendCounts
			return [2][]uint32{in, make([]uint32, rl.off[n-1]+rl.n[n-1])}
		}
		s := newSim(t, n, func(r int) []Step { return ShiftAlltoall(r, sendCounts(r), sendCounts(r)) }, init)
		s.run(t)
		for r := range n {
			rl := countsLayout(sendCounts(r))
			for p := range n {
				if p == r {
					continue // the caller copies its own block
				}
				for e := rl.off[p]; e < rl.off[p]+rl.n[p]; e++ {
					if s.bufs[r][1][e] != uint32(p*64+r) {
						t.Fatalf("n=%d rank %d got %d from block of %d", n, r, s.bufs[r][1][e], p)
					}
				}
			}
		}
	}
}

// TestDisseminationBarrier checks that after the schedule every rank has
// heard from every other rank, directly or through intermediaries.
func TestDisseminationBarrier(t *testing.T) {
	for n := 1; n <= 17; n++ {
		heard := make([]uint32, n)
		for r := range heard {
			heard[r] = 1 << r
		}
		rounds := len(DisseminationBarrier(0, n))
		if want := bits.Len(uint(n - 1)); n > 1 && rounds != want {
			t.Fatalf("n=%d: %d rounds, want %d", n, rounds, want)
		}
		for k := range rounds {
			next := append([]uint32(nil), heard...)
			for r := range n {
				st := DisseminationBarrier(r, n)[k]
				next[st.SendTo] |= heard[r]
			}
			heard = next
		}
		for r := range n {
			if heard[r] != uint32(1)<<n-1 {
				t.Fatalf("n=%d: rank %d heard only %b", n, r, heard[r])
			}
		}
	}
}

// TestPlanDependencies checks the hazards the executor relies on.
func TestPlanDependencies(t *testing.T) {
	p, err := newPlan(RingAllreduce(0, 2, 8, 2), 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	// n=2, count 8, seg 2: RS sends chunk 0 (2 steps), receives chunk 1;
	// AG sends chunk 1 (the reduced one), so AG's first send waits for the
	// RS receive of the same segment.
	if p.sendAfter[0] != -1 || p.sendAfter[2] != 0 || p.sendAfter[3] != 1 {
		t.Fatalf("sendAfter = %v", p.sendAfter)
	}
	// AG receives chunk 0, which RS sent in steps 0 and 1.
	if p.recvAfter[2] != 0 || p.recvAfter[3] != 1 {
		t.Fatalf("recvAfter = %v", p.recvAfter)
	}
	if p.sendTag[3] != 3 || p.recvTag[3] != 3 || p.scratch != 2 {
		t.Fatalf("tags %v/%v scratch %d", p.sendTag, p.recvTag, p.scratch)
	}
	if _, err := newPlan([]Step{{SendTo: 0, RecvFrom: -1}}, 0, 2); err == nil {
		t.Fatal("a step sending to itself was accepted")
	}
}

func TestRecursiveDoublingSchedule(t *testing.T) {
	for n := 1; n <= 17; n++ {
		for _, count := range []int{0, 1, 5} {
			s := newSim(t, n, func(r int) []Step { return RecursiveDoublingAllreduce(r, n, count) }, own(count))
			s.run(t)
			all := uint32(1)<<n - 1
			for r := range n {
				for e := range count {
					if s.bufs[r][0][e] != all {
						t.Fatalf("n=%d rank %d element %d has contributions %b", n, r, e, s.bufs[r][0][e])
					}
				}
			}
		}
	}
}

func TestHalvingDoublingAllreduceSchedule(t *testing.T) { simAllreduce(t, HalvingDoublingAllreduce) }
