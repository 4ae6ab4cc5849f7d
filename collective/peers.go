package collective

import "slices"

// SchedulePeers returns, in increasing order, the peers that rank exchanges
// messages with in the steady state of a job of size ranks whose host of
// each rank hostOf gives (ids, nil for one host), as the built-in schedules
// run: the ring's and the chain broadcast's neighbours (rank±1), the
// partners of recursive doubling (rank^d, and rank±p for the ranks past
// the largest power of two p), and, on several hosts, the neighbours in the
// ring inside this host and in the ring across hosts of this rank's local
// index. The rule is symmetric (q is among rank's peers exactly when rank
// is among q's), so every rank of a job can form these links eagerly and
// leave the others (all-to-all's, the barrier's, a broadcast's from a
// distant root) to form on first use: about 2 log2(size) links a rank
// instead of size-1.
func SchedulePeers(rank, size int, hostOf []int) []int {
	if size < 2 || rank < 0 || rank >= size {
		return nil
	}
	set := map[int]bool{}
	add := func(q int) {
		if q >= 0 && q < size && q != rank {
			set[q] = true
		}
	}
	add((rank + 1) % size)
	add((rank + size - 1) % size)
	p := 1
	for p*2 <= size {
		p *= 2
	}
	if rank < p {
		for d := 1; d < p; d *= 2 {
			add(rank ^ d)
		}
		add(rank + p)
	} else {
		add(rank - p)
	}
	if h := newHierarchy(hostOf, size, HierarchyOn); h.hosts != nil {
		host, local := place(h.hosts, rank)
		ring := func(ranks []int, pos int) {
			add(ranks[(pos+1)%len(ranks)])
			add(ranks[(pos+len(ranks)-1)%len(ranks)])
		}
		ring(h.hosts[host], local)
		col := column(h.hosts, local)
		ring(col, slices.Index(col, rank))
	}
	out := make([]int, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}
