package collective

import (
	"fmt"
	"testing"
)

// hostLayouts are host layouts of the two-level schedules: contiguous,
// interleaved (as mpirun's by-node mapping places ranks) and shuffled.
var hostLayouts = [][][]int{
	{{0, 1}, {2, 3}},
	{{0, 2}, {1, 3}},
	{{0, 1, 2}, {3, 4, 5}},
	{{0, 1}, {2, 3}, {4, 5}},
	{{1, 4}, {0, 5}, {2, 3}},
	{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}},
	{{0, 1, 2, 3}, {4, 5, 6, 7}},
}

func layoutSize(hosts [][]int) int {
	n := 0
	for _, g := range hosts {
		n += len(g)
	}
	return n
}

// crossElements returns how many elements rank r's plan sends to ranks on
// other hosts (or, with recv, receives from them).
func crossElements(steps []Step, hosts [][]int, r int, recv bool) int {
	hr, _ := place(hosts, r)
	n := 0
	for _, st := range steps {
		peer, seg := st.SendTo, st.Send
		if recv {
			peer, seg = st.RecvFrom, st.Recv
		}
		if peer >= 0 {
			if h, _ := place(hosts, peer); h != hr {
				n += seg.Len
			}
		}
	}
	return n
}

func TestHierarchicalAllreduceSchedule(t *testing.T) {
	for _, hosts := range hostLayouts {
		n := layoutSize(hosts)
		for _, count := range []int{0, 1, n - 1, 2*n + 3, 97, 400} {
			for _, seg := range []int{1, 3, 1000} {
				for _, blocks := range []int{1, 2, 5} {
					t.Run(fmt.Sprintf("%v/c%d/seg%d/b%d", hosts, count, seg, blocks), func(t *testing.T) {
						mk := func(r int) []Step { return HierarchicalAllreduce(r, hosts, count, seg, blocks) }
						s := newSim(t, n, mk, own(count))
						s.run(t)
						s.checkAllreduced(t, count)
						// Each host sends 2(H-1)/H of the buffer across hosts (up to
						// the rounding of blocks and chunks).
						h := len(hosts)
						for _, g := range hosts {
							sent := 0
							for _, r := range g {
								sent += crossElements(mk(r), hosts, r, false)
							}
							want := 2 * count * (h - 1) / h
							if slack := 2 * blocks * len(g) * h; sent < want-slack || sent > want+slack {
								t.Fatalf("host %v sends %d elements across hosts, want about %d", g, sent, want)
							}
						}
					})
				}
			}
		}
	}
}

// TestHierarchicalAllreduceCrossesLess: on 2 hosts of 2 ranks, the busiest
// host sends a third less across the network than the flat ring's.
func TestHierarchicalAllreduceCrossesLess(t *testing.T) {
	hosts, count := [][]int{{0, 1}, {2, 3}}, 1200
	flat, hier := 0, 0
	for _, r := range hosts[0] {
		flat += crossElements(RingAllreduce(r, 4, count, 100), hosts, r, false)
		hier += crossElements(HierarchicalAllreduce(r, hosts, count, 100, 3), hosts, r, false)
	}
	if flat != 1800 || hier != 1200 {
		t.Fatalf("host 0 sends %d elements across hosts flat and %d in two levels, want 1800 and 1200", flat, hier)
	}
}

func TestHierarchicalAllgatherSchedule(t *testing.T) {
	for _, hosts := range hostLayouts {
		n := layoutSize(hosts)
		for _, blocks := range []int{1, 2, 4} {
			counts := make([]int, n)
			for i := range counts {
				counts[i] = (i*5 + 2) % 7 // includes empty chunks
			}
			l := countsLayout(counts)
			total := l.off[n-1] + l.n[n-1]
			mk := func(r int) []Step { return HierarchicalAllgather(r, hosts, counts, 2, blocks) }
			s := newSim(t, n, mk, ownChunk(l))
			s.run(t)
			s.checkGathered(t, l)
			// Each host receives every other host's chunks across hosts once.
			for _, g := range hosts {
				got, own := 0, 0
				for _, r := range g {
					got += crossElements(mk(r), hosts, r, true)
					own += counts[r]
				}
				if want := total - own; got != want {
					t.Fatalf("%v: host %v receives %d elements across hosts, want %d", hosts, g, got, want)
				}
			}
		}
	}
}

func TestHostOrderedBroadcastSchedule(t *testing.T) {
	uneven := [][][]int{{{0, 1, 2}, {3}}, {{0}, {1, 2}, {3, 4, 5}}, {{2, 0}, {1}}}
	for _, hosts := range append(append([][][]int{}, hostLayouts...), uneven...) {
		n := layoutSize(hosts)
		for root := range n {
			for _, count := range []int{0, 1, 10} {
				mk := func(r int) []Step { return HostOrderedBroadcast(r, hosts, root, count, 3) }
				s := newSim(t, n, mk, rootOwns(root, count))
				s.run(t)
				for r := range n {
					for e := range count {
						if s.bufs[r][0][e] != 1<<root {
							t.Fatalf("%v root %d: rank %d element %d = %b", hosts, root, r, e, s.bufs[r][0][e])
						}
					}
				}
				// One copy into every other host.
				sent := 0
				for r := range n {
					sent += crossElements(mk(r), hosts, r, false)
				}
				if want := count * (len(hosts) - 1); sent != want {
					t.Fatalf("%v root %d: %d elements cross hosts, want %d", hosts, root, sent, want)
				}
			}
		}
	}
}

func TestNewHierarchy(t *testing.T) {
	for _, tt := range []struct {
		hostOf []int
		size   int
		hosts  int
		even   bool
	}{
		{nil, 4, 0, false},
		{[]int{0, 0, 0, 0}, 4, 0, false},
		{[]int{5, 5, 9, 9}, 4, 2, true},
		{[]int{1, 2, 1, 2}, 4, 2, true},
		{[]int{0, 0, 1}, 3, 2, false},
		{[]int{0, 1, 2, 3}, 4, 4, false},
		{[]int{0, 0, 1, 1}, 5, 0, false}, // wrong length: no layout
	} {
		h := newHierarchy(tt.hostOf, tt.size, HierarchyAuto)
		if len(h.hosts) != tt.hosts || h.even != tt.even {
			t.Errorf("newHierarchy(%v, %d): %d hosts, even %v; want %d, %v", tt.hostOf, tt.size, len(h.hosts), h.even, tt.hosts, tt.even)
		}
	}
	h := newHierarchy([]int{0, 0, 1, 1}, 4, HierarchyAuto)
	if h.twoLevel(100, 100) || !h.twoLevel(101, 100) || !h.hostOrdered() {
		t.Error("auto: two levels only past the inline size; broadcast host-ordered")
	}
	h.mode = HierarchyOn
	if !h.twoLevel(1, 100) {
		t.Error("on: two levels at any size")
	}
	h.mode = HierarchyOff
	if h.twoLevel(1<<30, 100) || h.hostOrdered() {
		t.Error("off: flat")
	}
}
