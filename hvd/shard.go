package hvd

import "math/rand/v2"

// Shard returns the items of [0, n) that part index of parts owns:
// index, index+parts, index+2·parts, … . The parts are disjoint and
// together cover [0, n) exactly once; their sizes differ by at most one.
// Striding (rather than cutting contiguous blocks) keeps global batches
// the same at any number of ranks: the j-th batch of b items of every
// part together are items [j·b·parts, (j+1)·b·parts) of the whole.
func Shard(n, parts, index int) []int {
	return strided(identity(n), parts, index)
}

// ShuffledShard is Shard over a permutation of [0, n) that depends only on
// seed and epoch: every rank draws the same permutation, so the parts stay
// disjoint, and each epoch visits the data in a new order.
func ShuffledShard(n, parts, index int, seed uint64, epoch int) []int {
	perm := identity(n)
	r := rand.New(rand.NewPCG(seed, uint64(epoch)))
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	return strided(perm, parts, index)
}

// StepsPerEpoch is the number of batches of at most batch items every
// rank can take from its part of n items, the same on every rank: the
// smallest part, n/parts items, decides (the ranks with one item more
// leave it out, a different one each shuffled epoch).
func StepsPerEpoch(n, parts, batch int) int {
	if parts <= 0 || batch <= 0 {
		return 0
	}
	per := n / parts
	return (per + batch - 1) / batch
}

// Batch returns the step-th batch of at most size items of a shard,
// limited to the first perRank = n/parts items so that all ranks take
// batches of the same sizes.
func Batch(shard []int, perRank, size, step int) []int {
	perRank = min(perRank, len(shard))
	lo := min(step*size, perRank)
	return shard[lo:min(lo+size, perRank)]
}

func identity(n int) []int {
	s := make([]int, max(n, 0))
	for i := range s {
		s[i] = i
	}
	return s
}

func strided(items []int, parts, index int) []int {
	if parts <= 0 || index < 0 || index >= parts {
		return nil
	}
	out := make([]int, 0, (len(items)-index+parts-1)/parts)
	for i := index; i < len(items); i += parts {
		out = append(out, items[i])
	}
	return out
}
