package collective

// hierarchy is a communicator's layout in hosts, derived once from
// Options.Hosts, and the current choice of algorithms.
type hierarchy struct {
	mode Hierarchy
	// hosts[h] lists the ranks of host h in increasing order; hosts are
	// ordered by their lowest rank. nil when the Comm knows no layout or
	// the layout has a single host.
	hosts [][]int
	// even: at least two ranks on every host, the same number on each.
	// Only such layouts run the two-level all-reduce and all-gather; the
	// host-ordered broadcast takes any layout of two hosts or more.
	even bool
}

// newHierarchy groups the ranks by host.
func newHierarchy(hostOf []int, size int, mode Hierarchy) hierarchy {
	h := hierarchy{mode: mode}
	if len(hostOf) != size {
		return h
	}
	index := map[int]int{}
	var hosts [][]int
	for r, id := range hostOf {
		i, ok := index[id]
		if !ok {
			i = len(hosts)
			index[id] = i
			hosts = append(hosts, nil)
		}
		hosts[i] = append(hosts[i], r)
	}
	if len(hosts) < 2 {
		return h
	}
	h.hosts, h.even = hosts, true
	for _, g := range hosts {
		if len(g) != len(hosts[0]) || len(g) < 2 {
			h.even = false
		}
	}
	return h
}

// twoLevel reports whether an all-reduce or all-gather of the given bytes
// runs in two levels. Auto takes them past the inline size: below it, the
// flat recursive doubling's log2(size) messages beat the two levels' extra
// rounds; above it, each host sends its data across the network once
// instead of the flat ring's 2(size-1)/size times over the busiest link.
func (h hierarchy) twoLevel(bytes, inline int) bool {
	if !h.even || h.mode == HierarchyOff {
		return false
	}
	return h.mode == HierarchyOn || bytes > inline
}

// hostOrdered reports whether a broadcast follows the hosts (every host
// entered once) instead of the ranks' order.
func (h hierarchy) hostOrdered() bool {
	return h.hosts != nil && h.mode != HierarchyOff
}

// place returns the host of rank and its index among that host's ranks.
func place(hosts [][]int, rank int) (host, local int) {
	for h, g := range hosts {
		for i, r := range g {
			if r == rank {
				return h, i
			}
		}
	}
	panic("collective: rank outside the host layout")
}

// column returns the rank with index local on every host (hosts with fewer
// ranks are skipped): the ring across hosts of that local index.
func column(hosts [][]int, local int) []int {
	col := make([]int, 0, len(hosts))
	for _, g := range hosts {
		if local < len(g) {
			col = append(col, g[local])
		}
	}
	return col
}

// sub splits chunk c of l into parts nearly equal chunks, at the same place
// in the buffer.
func (l layout) sub(c, parts int) layout {
	s := evenLayout(l.n[c], parts)
	for i := range s.off {
		s.off[i] += l.off[c]
	}
	return s
}

// stage is one phase of a pipelined two-level collective, applied to one
// block of the buffer.
type stage func(steps []Step, block int) []Step

// pipeline appends the phases of every block in software-pipelined order:
// round t holds phase 0 of block t, phase 1 of block t-1, and so on. The
// executor waits only for the data each step needs, so one block's
// transfer between hosts overlaps the next block's work inside the host
// and the previous block's delivery.
func pipeline(steps []Step, blocks int, phases ...stage) []Step {
	for t := range blocks + len(phases) - 1 {
		for p, phase := range phases {
			if b := t - p; b >= 0 && b < blocks {
				steps = phase(steps, b)
			}
		}
	}
	return steps
}

// HierarchicalAllreduce is the two-level all-reduce of count elements on
// hosts (the ranks of each host; every host has the same number m of them,
// and rank is one of them). The buffer is cut into blocks; for each block
// the ranks of a host reduce-scatter it among themselves (m chunks), the
// ranks with the same index on every host all-reduce their chunk across
// hosts with a ring, and the ranks of a host all-gather the chunks. Every
// host thus sends 2(H-1)/H of the buffer across the network, where a flat
// ring over all ranks sends 2(n-1)/n of it over each link between hosts,
// the cross-host transfers of one block overlapping the in-host phases of
// the others (see pipeline).
func HierarchicalAllreduce(rank int, hosts [][]int, count, seg, blocks int) []Step {
	host, local := place(hosts, rank)
	m, h := len(hosts[host]), len(hosts)
	in := members{ranks: hosts[host], size: m, pos: local}
	across := members{ranks: column(hosts, local), size: h, pos: host}
	whole := evenLayout(count, blocks)
	inHost := func(b int) layout { return whole.sub(b, m) }
	crossing := func(b int) layout { return inHost(b).sub(local, h) }
	return pipeline(nil, blocks,
		func(s []Step, b int) []Step { return ringPhase(s, in, inHost(b), -1, seg, Reduce) },
		func(s []Step, b int) []Step { return ringPhase(s, across, crossing(b), -1, seg, Reduce) },
		func(s []Step, b int) []Step { return ringPhase(s, across, crossing(b), 0, seg, Copy) },
		func(s []Step, b int) []Step { return ringPhase(s, in, inHost(b), 0, seg, Copy) },
	)
}

// HierarchicalAllgather is the two-level all-gather of chunk i (counts[i]
// elements, back to back) from rank i on hosts (as for
// HierarchicalAllreduce). Each chunk is cut into blocks; for each block the
// ranks with the same index on every host exchange their pieces across
// hosts with a ring, then the ranks of a host circulate among themselves
// the pieces of each host's ranks. Every host receives each other host's
// data across the network once.
func HierarchicalAllgather(rank int, hosts [][]int, counts []int, seg, blocks int) []Step {
	host, local := place(hosts, rank)
	m, h := len(hosts[host]), len(hosts)
	whole := countsLayout(counts)
	piece := func(r, b int) (off, n int) {
		off, n = partition(counts[r], blocks, b)
		return whole.off[r] + off, n
	}
	// over returns the layout of block b's pieces of ranks, one per position.
	over := func(ranks []int, b int) layout {
		l := layout{make([]int, len(ranks)), make([]int, len(ranks))}
		for p, r := range ranks {
			l.off[p], l.n[p] = piece(r, b)
		}
		return l
	}
	col := column(hosts, local)
	across := members{ranks: col, size: h, pos: host}
	in := members{ranks: hosts[host], size: m, pos: local}
	return pipeline(nil, blocks,
		func(s []Step, b int) []Step { return ringPhase(s, across, over(col, b), 0, seg, Copy) },
		func(s []Step, b int) []Step {
			// Position q of this host holds, after the exchange across
			// hosts, the pieces of rank q of every host: one ring per host.
			for g := range hosts {
				s = ringPhase(s, in, over(hosts[g], b), 0, seg, Copy)
			}
			return s
		},
	)
}

// HostOrderedBroadcast is the pipelined chain broadcast of count elements
// from root that visits the hosts one after another: root, the other ranks
// of root's host, then each following host's ranks. Each host receives the
// data across the network once, whatever the order of the ranks.
func HostOrderedBroadcast(rank int, hosts [][]int, root, count, seg int) []Step {
	rh, ri := place(hosts, root)
	var order []int
	pos := -1
	for j := range hosts {
		g := hosts[mod(rh+j, len(hosts))]
		for i := range g {
			r := g[i]
			if j == 0 {
				r = g[mod(ri+i, len(g))]
			}
			if r == rank {
				pos = len(order)
			}
			order = append(order, r)
		}
	}
	return chainBroadcast(members{ranks: order, size: len(order), pos: pos}, count, seg)
}
