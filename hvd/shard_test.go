package hvd_test

import (
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
)

func TestShardCoversTheDataExactlyOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 10, 64, 1001} {
		for _, parts := range []int{1, 2, 3, 4, 8, 16} {
			for _, shuffled := range []bool{false, true} {
				seen := make([]int, n)
				sizes := map[int]bool{}
				for i := range parts {
					s := hvd.Shard(n, parts, i)
					if shuffled {
						s = hvd.ShuffledShard(n, parts, i, 42, 3)
					}
					sizes[len(s)] = true
					for _, x := range s {
						seen[x]++
					}
				}
				for x, c := range seen {
					if c != 1 {
						t.Fatalf("n=%d parts=%d shuffled=%v: item %d taken %d times", n, parts, shuffled, x, c)
					}
				}
				if len(sizes) > 2 {
					t.Errorf("n=%d parts=%d: part sizes %v differ by more than one", n, parts, sizes)
				}
			}
		}
	}
	if hvd.Shard(5, 2, 2) != nil || hvd.Shard(5, 0, 0) != nil {
		t.Error("an index outside [0, parts) got items")
	}
}

func TestShuffledShardDependsOnSeedAndEpoch(t *testing.T) {
	a := hvd.ShuffledShard(100, 2, 1, 7, 0)
	if !slices.Equal(a, hvd.ShuffledShard(100, 2, 1, 7, 0)) {
		t.Error("same seed and epoch, different shards")
	}
	if slices.Equal(a, hvd.ShuffledShard(100, 2, 1, 7, 1)) || slices.Equal(a, hvd.ShuffledShard(100, 2, 1, 8, 0)) {
		t.Error("another epoch or seed gave the same order")
	}
}

func TestStridedShardsKeepGlobalBatches(t *testing.T) {
	// the j-th batches of b items of all 4 parts are the j-th batch of 4b
	// items of the whole, so training at any rank count sees the same
	// global batches.
	const n, b = 64, 4
	for j := range hvd.StepsPerEpoch(n, 4, b) {
		var union []int
		for r := range 4 {
			union = append(union, hvd.Batch(hvd.ShuffledShard(n, 4, r, 1, 0), n/4, b, j)...)
		}
		whole := hvd.Batch(hvd.ShuffledShard(n, 1, 0, 1, 0), n, 4*b, j)
		slices.Sort(union)
		slices.Sort(whole)
		if !slices.Equal(union, whole) {
			t.Fatalf("batch %d: ranks %v, one rank %v", j, union, whole)
		}
	}
}

func TestStepsPerEpochAndBatch(t *testing.T) {
	for _, c := range []struct{ n, parts, batch, want int }{
		{10, 4, 2, 1}, {60000, 4, 32, 469}, {60000, 1, 32, 1875}, {3, 4, 1, 0}, {9, 0, 1, 0}, {9, 1, 0, 0},
	} {
		if got := hvd.StepsPerEpoch(c.n, c.parts, c.batch); got != c.want {
			t.Errorf("StepsPerEpoch(%d, %d, %d) = %d, want %d", c.n, c.parts, c.batch, got, c.want)
		}
	}
	// 11 items on 2 ranks: 6 and 5; both take 5, in batches of 2, 2, 1.
	for r := range 2 {
		s := hvd.Shard(11, 2, r)
		var sizes []int
		for j := range hvd.StepsPerEpoch(11, 2, 2) {
			sizes = append(sizes, len(hvd.Batch(s, 11/2, 2, j)))
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) {
			t.Errorf("rank %d batch sizes %v", r, sizes)
		}
	}
}
