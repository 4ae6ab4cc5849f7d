package ps

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randShape returns a shape of 1 to 4 dimensions whose row count is often
// small (1 to 10) so that the row caps are exercised, and an element size.
func randShape(r *rand.Rand) ([]int, int) {
	shape := make([]int, 1+r.IntN(4))
	if r.IntN(4) == 0 {
		shape[0] = 1 + r.IntN(10)
	} else {
		shape[0] = 1 + r.IntN(5000)
	}
	for i := 1; i < len(shape); i++ {
		shape[i] = 1 + r.IntN(300)
	}
	return shape, []int{1, 2, 4, 8}[r.IntN(4)]
}

// randBytes returns a byte count from 1 to 16 MiB, spread evenly over the
// powers of two.
func randBytes(r *rand.Rand) int64 {
	return 1 + r.Int64N(int64(1)<<r.IntN(25))
}

// shardBytes is the size of every shard of Split(rows, n).
func shardBytes(rows, n int, rowBytes int64) []int64 {
	out := make([]int64, n)
	for i, rr := range Split(rows, n) {
		out[i] = int64(rr.Len()) * rowBytes
	}
	return out
}

func mustRowSize(t *testing.T, shape []int, elemSize int) (int, int64) {
	t.Helper()
	rows, rowBytes, err := rowSize(shape, elemSize)
	if err != nil {
		t.Fatal(err)
	}
	return rows, rowBytes
}

func TestSplitCoversEveryRowOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 29))
	for range 2000 {
		rows := 1 + r.IntN(1000)
		shards := 1 + r.IntN(rows)
		blocks := Split(rows, shards)
		if len(blocks) != shards {
			t.Fatalf("Split(%d, %d) made %d blocks", rows, shards, len(blocks))
		}
		owner := make([]int, rows)
		for i := range owner {
			owner[i] = -1
		}
		for k, b := range blocks {
			want := rows / shards
			if k < rows%shards {
				want++
			}
			if b.Len() != want {
				t.Fatalf("Split(%d, %d) block %d = %v, %d rows, want %d", rows, shards, k, b, b.Len(), want)
			}
			for row := b.Start; row < b.End; row++ {
				if owner[row] != -1 {
					t.Fatalf("Split(%d, %d): row %d in blocks %d and %d", rows, shards, row, owner[row], k)
				}
				owner[row] = k
			}
			if k > 0 && b.Start != blocks[k-1].End {
				t.Fatalf("Split(%d, %d): block %d starts at %d, block %d ends at %d", rows, shards, k, b.Start, k-1, blocks[k-1].End)
			}
		}
		for row, k := range owner {
			if k == -1 {
				t.Fatalf("Split(%d, %d): row %d in no block", rows, shards, row)
			}
		}
	}
}

func TestSplitPanicsOutsideOneToRows(t *testing.T) {
	for _, c := range [][2]int{{5, 0}, {5, -1}, {5, 6}, {0, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Split(%d, %d) did not panic", c[0], c[1])
				}
			}()
			Split(c[0], c[1])
		}()
	}
}

func TestMinSizePartitionerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 29))
	for range 5000 {
		shape, elem := randShape(r)
		minB, maxShards := randBytes(r), 1+r.IntN(16)
		p, err := MinSizePartitioner(minB, maxShards)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Shards(shape, elem)
		if err != nil {
			t.Fatal(err)
		}
		rows, rowBytes := mustRowSize(t, shape, elem)
		limit := min(maxShards, rows)
		if n < 1 || n > limit {
			t.Fatalf("%v on %v×%dB: %d shards, want 1..%d", p, shape, elem, n, limit)
		}
		// TensorFlow's count: ceil(bytes/minimum), within 1..limit.
		total := int64(rows) * rowBytes
		if want := int(max(1, min(int64(limit), (total+minB-1)/minB))); n != want {
			t.Fatalf("%v on %v×%dB (%d bytes): %d shards, want %d", p, shape, elem, total, n, want)
		}
	}
}

func TestMaxSizePartitionerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 29))
	for range 5000 {
		shape, elem := randShape(r)
		maxB, maxShards := randBytes(r), 1+r.IntN(64)
		if r.IntN(4) == 0 {
			maxShards = math.MaxInt
		}
		p, err := MaxSizePartitioner(maxB, maxShards)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Shards(shape, elem)
		if err != nil {
			t.Fatal(err)
		}
		rows, rowBytes := mustRowSize(t, shape, elem)
		limit := min(maxShards, rows)
		if n < 1 || n > limit {
			t.Fatalf("%v on %v×%dB: %d shards, want 1..%d", p, shape, elem, n, limit)
		}
		switch {
		case rowBytes > maxB:
			// No shard can stay within the maximum: one row per shard.
			if n != limit {
				t.Fatalf("%v on %v×%dB (rows of %d bytes): %d shards, want %d", p, shape, elem, rowBytes, n, limit)
			}
		case n < maxShards:
			for k, b := range shardBytes(rows, n, rowBytes) {
				if b > maxB {
					t.Fatalf("%v on %v×%dB: %d shards, shard %d has %d bytes", p, shape, elem, n, k, b)
				}
			}
		}
		// As few as possible: one shard fewer would break the maximum.
		if n > 1 && slices.Max(shardBytes(rows, n-1, rowBytes)) <= maxB {
			t.Fatalf("%v on %v×%dB: %d shards, but %d would keep every shard ≤ %d bytes", p, shape, elem, n, n-1, maxB)
		}
	}
}

func TestFixedShardsPartitionerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 29))
	for range 2000 {
		shape, elem := randShape(r)
		k := 1 + r.IntN(20)
		p, err := FixedShardsPartitioner(k)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Shards(shape, elem)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(k, shape[0]); n != want {
			t.Fatalf("%v on %v: %d shards, want %d", p, shape, n, want)
		}
	}
}

// TestPartitionerWorkedExamples pins the 256 KiB rule the seeds use and the
// examples of TensorFlow's documentation and tests.
func TestPartitionerWorkedExamples(t *testing.T) {
	must := func(p Partitioner, err error) Partitioner {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		p     Partitioner
		shape []int
		elem  int
		want  int
	}{
		// 1 MiB of float32 on 2 servers: two shards of 512 KiB.
		{must(MinSizePartitioner(256<<10, 2)), []int{512, 512}, 4, 2},
		// 100 KiB: under the minimum, one shard.
		{must(MinSizePartitioner(256<<10, 2)), []int{25600}, 4, 1},
		// 10 MiB on 4 servers: one shard per server.
		{must(MinSizePartitioner(256<<10, 4)), []int{2560, 1024}, 4, 4},
		// 300 KiB: TensorFlow rounds up, two shards of 150 KiB.
		{must(MinSizePartitioner(256<<10, 4)), []int{300, 256}, 4, 2},
		// 4 MiB uncapped: 16 shards of 256 KiB (min_max_variable_partitioner's docstring).
		{must(MinSizePartitioner(256<<10, 100)), []int{1024, 1024}, 4, 16},
		// A single 2 MiB row cannot be split.
		{must(MinSizePartitioner(256<<10, 4)), []int{1, 512 << 10}, 4, 1},
		// TensorFlow's sharded_variable tests.
		{must(MinSizePartitioner(4, 2)), []int{6, 1}, 4, 2},
		{must(MinSizePartitioner(4, 10)), []int{6, 1}, 4, 6},
		{must(MaxSizePartitioner(4, math.MaxInt)), []int{6, 1}, 4, 6},
		{must(MaxSizePartitioner(4, 2)), []int{6, 1}, 4, 2},
		{must(MaxSizePartitioner(1024, math.MaxInt)), []int{6, 1}, 4, 1},
		{must(FixedShardsPartitioner(2)), []int{10, 3}, 4, 2},
		// Rows of 4000 bytes above a 100-byte maximum: one row per shard.
		{must(MaxSizePartitioner(100, math.MaxInt)), []int{3, 1000}, 4, 3},
		// 10 MiB in at most 1 MiB shards: 10.
		{must(MaxSizePartitioner(1<<20, 64)), []int{2560, 1024}, 4, 10},
		{must(FixedShardsPartitioner(8)), []int{5, 7}, 8, 5},
	}
	for _, c := range cases {
		got, err := c.p.Shards(c.shape, c.elem)
		if err != nil {
			t.Errorf("%v on %v×%dB: %v", c.p, c.shape, c.elem, err)
		} else if got != c.want {
			t.Errorf("%v on %v×%dB: %d shards, want %d", c.p, c.shape, c.elem, got, c.want)
		}
	}
}

func TestPartitionerBadArguments(t *testing.T) {
	ctors := []struct {
		err  error
		want string
	}{
		{second(MinSizePartitioner(-1, 2)), "ps: MinSizePartitioner: min shard bytes must be positive, got -1"},
		{second(MinSizePartitioner(0, 2)), "ps: MinSizePartitioner: min shard bytes must be positive, got 0"},
		{second(MinSizePartitioner(256<<10, 0)), "ps: MinSizePartitioner: max shards must be positive, got 0"},
		{second(MaxSizePartitioner(0, 2)), "ps: MaxSizePartitioner: max shard bytes must be positive, got 0"},
		{second(MaxSizePartitioner(1<<20, -3)), "ps: MaxSizePartitioner: max shards must be positive, got -3"},
		{second(FixedShardsPartitioner(0)), "ps: FixedShardsPartitioner: shards must be positive, got 0"},
	}
	for _, c := range ctors {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("got error %v, want %q", c.err, c.want)
		}
	}
	p, err := MinSizePartitioner(256<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		shape []int
		elem  int
		want  string
	}{
		{nil, 4, "shape is empty"},
		{[]int{}, 4, "shape is empty"},
		{[]int{0, 3}, 4, "every dimension must be positive"},
		{[]int{3, -1}, 4, "every dimension must be positive"},
		{[]int{3}, 0, "element size must be positive"},
		{[]int{1 << 31, 1 << 31, 1 << 2}, 2, "overflows int64"},
	}
	for _, c := range shapes {
		if _, err := p.Shards(c.shape, c.elem); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Shards(%v, %d) = error %v, want one containing %q", c.shape, c.elem, err, c.want)
		}
	}
}

func second(_ Partitioner, err error) error { return err }
