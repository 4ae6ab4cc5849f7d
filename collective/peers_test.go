package collective

import (
	"slices"
	"testing"
)

// TestSchedulePeersSymmetric: for every size up to 70 and several host
// layouts, q is among rank's peers exactly when rank is among q's, no rank
// lists itself, and the lists stay small (about 2 log2 size).
func TestSchedulePeersSymmetric(t *testing.T) {
	for size := 1; size <= 70; size++ {
		for _, perHost := range []int{0, 1, 2, 3, 4, 8} {
			var hostOf []int
			if perHost > 0 {
				hostOf = make([]int, size)
				for r := range hostOf {
					hostOf[r] = r / perHost
				}
			}
			peers := make([][]int, size)
			for r := range size {
				peers[r] = SchedulePeers(r, size, hostOf)
			}
			for r, ps := range peers {
				if slices.Contains(ps, r) {
					t.Fatalf("size %d, %d a host: rank %d lists itself: %v", size, perHost, r, ps)
				}
				if len(ps) > 4*bitsOf(size)+4 {
					t.Errorf("size %d, %d a host: rank %d has %d peers: %v", size, perHost, r, len(ps), ps)
				}
				for _, q := range ps {
					if !slices.Contains(peers[q], r) {
						t.Fatalf("size %d, %d a host: rank %d lists %d, but %d does not list %d (%v)", size, perHost, r, q, q, r, peers[q])
					}
				}
			}
		}
	}
}

// bitsOf is the number of bits of n.
func bitsOf(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestSchedulePeersCoverSchedules: every peer that the ring all-reduce,
// the recursive-doubling all-reduce and the two-level all-reduce send to
// or receive from is among SchedulePeers.
func TestSchedulePeersCoverSchedules(t *testing.T) {
	for size := 2; size <= 24; size++ {
		for r := range size {
			peers := SchedulePeers(r, size, nil)
			for _, steps := range [][]Step{RingAllreduce(r, size, 1000, 64), RecursiveDoublingAllreduce(r, size, 1000), HalvingDoublingAllreduce(r, size, 1000, 64)} {
				for _, st := range steps {
					for _, q := range []int{st.SendTo, st.RecvFrom} {
						if q >= 0 && !slices.Contains(peers, q) {
							t.Fatalf("size %d: rank %d exchanges with %d, not in %v", size, r, q, peers)
						}
					}
				}
			}
		}
	}
	for _, layout := range []struct{ hosts, per int }{{2, 2}, {3, 4}, {4, 3}} {
		size := layout.hosts * layout.per
		hostOf := make([]int, size)
		var hosts [][]int
		for h := range layout.hosts {
			var g []int
			for i := range layout.per {
				g = append(g, h*layout.per+i)
				hostOf[h*layout.per+i] = h
			}
			hosts = append(hosts, g)
		}
		for r := range size {
			peers := SchedulePeers(r, size, hostOf)
			for _, st := range HierarchicalAllreduce(r, hosts, 1000, 64, 2) {
				for _, q := range []int{st.SendTo, st.RecvFrom} {
					if q >= 0 && !slices.Contains(peers, q) {
						t.Fatalf("%d hosts × %d: rank %d exchanges with %d in the two-level all-reduce, not in %v", layout.hosts, layout.per, r, q, peers)
					}
				}
			}
		}
	}
}
