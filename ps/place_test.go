package ps

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

func randPartitioner(r *rand.Rand, servers int) Partitioner {
	var p Partitioner
	var err error
	switch r.IntN(4) {
	case 0:
		p, err = MinSizePartitioner(256<<10, servers) // the seeds' rule
	case 1:
		p, err = MinSizePartitioner(randBytes(r), 1+r.IntN(16))
	case 2:
		p, err = MaxSizePartitioner(randBytes(r), 1+r.IntN(64))
	default:
		p, err = FixedShardsPartitioner(1 + r.IntN(12))
	}
	if err != nil {
		panic(err)
	}
	return p
}

func randVars(r *rand.Rand) []VarSpec {
	vars := make([]VarSpec, 1+r.IntN(20))
	for i := range vars {
		shape, _ := randShape(r)
		vars[i] = VarSpec{Name: fmt.Sprintf("v%d", i), Shape: shape, DType: kernels.DTypes[r.IntN(len(kernels.DTypes))]}
	}
	return vars
}

func TestPlaceProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 29))
	for range 500 {
		vars := randVars(r)
		servers := 1 + r.IntN(8)
		p := randPartitioner(r, servers)
		pl, err := Place(vars, servers, p)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Servers != servers || len(pl.Vars) != len(vars) {
			t.Fatalf("Place(%d vars, %d servers) = %d vars on %d servers", len(vars), servers, len(pl.Vars), pl.Servers)
		}
		var largest, total int64
		for i, v := range pl.Vars {
			if !reflect.DeepEqual(v.VarSpec, vars[i]) {
				t.Fatalf("var %d is %+v, want %+v", i, v.VarSpec, vars[i])
			}
			rows, rowBytes := mustRowSize(t, v.Shape, v.DType.Size())
			n, err := p.Shards(v.Shape, v.DType.Size())
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Shards) != n {
				t.Fatalf("%s %v: %d shards, %v chose %d", v.Name, v.Shape, len(v.Shards), p, n)
			}
			// Every row owned exactly once, in row order.
			next := 0
			for k, s := range v.Shards {
				if s.Rows.Start != next || s.Rows.End <= s.Rows.Start {
					t.Fatalf("%s: shard %d rows %v after row %d", v.Name, k, s.Rows, next)
				}
				next = s.Rows.End
				if s.Bytes != int64(s.Rows.Len())*rowBytes {
					t.Fatalf("%s: shard %d of %d rows has %d bytes, rows are %d bytes", v.Name, k, s.Rows.Len(), s.Bytes, rowBytes)
				}
				if s.Server < 0 || s.Server >= servers {
					t.Fatalf("%s: shard %d on server %d of %d", v.Name, k, s.Server, servers)
				}
				largest = max(largest, s.Bytes)
				total += s.Bytes
			}
			if next != rows {
				t.Fatalf("%s: shards end at row %d of %d", v.Name, next, rows)
			}
		}
		loads := pl.ServerBytes()
		var sum int64
		for _, b := range loads {
			sum += b
		}
		if sum != total {
			t.Fatalf("servers hold %d bytes, shards %d", sum, total)
		}
		lo, hi := loads[0], loads[0]
		for _, b := range loads {
			lo, hi = min(lo, b), max(hi, b)
		}
		if hi-lo > largest {
			t.Fatalf("%v over %d servers: loads %v differ by %d, more than the largest shard (%d)", p, servers, loads, hi-lo, largest)
		}
		again, err := Place(vars, servers, p)
		if err != nil || !reflect.DeepEqual(again, pl) {
			t.Fatalf("Place is not deterministic: %+v then %+v (%v)", pl, again, err)
		}
	}
}

// TestPlaceLargestFirstTiesLowest pins the greedy rule on a case worked by
// hand: shards taken largest first, each to the least loaded server, ties
// to the lowest index and, between equal shards, in the order given.
func TestPlaceLargestFirstTiesLowest(t *testing.T) {
	p, err := FixedShardsPartitioner(1)
	if err != nil {
		t.Fatal(err)
	}
	vars := []VarSpec{
		{Name: "a", Shape: []int{1}, DType: kernels.U8},  // 1 byte
		{Name: "b", Shape: []int{3}, DType: kernels.U8},  // 3 bytes
		{Name: "c", Shape: []int{2}, DType: kernels.U8},  // 2 bytes
		{Name: "d", Shape: []int{2}, DType: kernels.U8},  // 2 bytes
		{Name: "e", Shape: []int{1}, DType: kernels.F16}, // 2 bytes
	}
	pl, err := Place(vars, 3, p)
	if err != nil {
		t.Fatal(err)
	}
	// b(3)→0; c(2)→1; d(2)→2; e(2)→1 (loads 3,2,2); a(1)→2 (loads 3,4,2).
	want := map[string]int{"b": 0, "c": 1, "d": 2, "e": 1, "a": 2}
	for name, server := range want {
		v, ok := pl.Var(name)
		if !ok {
			t.Fatalf("Var(%q) not found", name)
		}
		if got := v.Shards[0].Server; got != server {
			t.Errorf("%s on server %d, want %d", name, got, server)
		}
	}
	if got := pl.ServerBytes(); !reflect.DeepEqual(got, []int64{3, 4, 3}) {
		t.Errorf("ServerBytes() = %v, want [3 4 3]", got)
	}
	if _, ok := pl.Var("z"); ok {
		t.Error(`Var("z") found a variable that was never placed`)
	}
}

// TestPlaceSeedsRule: with MinSizePartitioner(256 KiB, servers), a large
// variable gets one shard per server and small ones stay whole.
func TestPlaceSeedsRule(t *testing.T) {
	const servers = 4
	p, err := MinSizePartitioner(256<<10, servers)
	if err != nil {
		t.Fatal(err)
	}
	vars := []VarSpec{
		{Name: "big", Shape: []int{2560, 1024}, DType: kernels.F32}, // 10 MiB
		{Name: "small", Shape: []int{100, 256}, DType: kernels.F32}, // 100 KiB
	}
	pl, err := Place(vars, servers, p)
	if err != nil {
		t.Fatal(err)
	}
	big, _ := pl.Var("big")
	if len(big.Shards) != servers {
		t.Fatalf("big: %d shards, want %d", len(big.Shards), servers)
	}
	for k, s := range big.Shards {
		if s.Server != k || s.Bytes != 10<<20/servers {
			t.Errorf("big shard %d: %d bytes on server %d, want %d on %d", k, s.Bytes, s.Server, 10<<20/servers, k)
		}
	}
	small, _ := pl.Var("small")
	if len(small.Shards) != 1 || small.Shards[0].Server != 0 {
		t.Errorf("small: %+v, want one shard on server 0", small.Shards)
	}
}

func TestPlaceCopiesShapes(t *testing.T) {
	p, err := FixedShardsPartitioner(2)
	if err != nil {
		t.Fatal(err)
	}
	vars := []VarSpec{{Name: "w", Shape: []int{4, 3}, DType: kernels.F32}}
	pl, err := Place(vars, 2, p)
	if err != nil {
		t.Fatal(err)
	}
	vars[0].Shape[0] = 99
	if got := pl.Vars[0].Shape; !reflect.DeepEqual(got, []int{4, 3}) {
		t.Errorf("placement's shape changed with the caller's slice: %v", got)
	}
}

type badPartitioner struct {
	n   int
	err error
}

func (b badPartitioner) Shards([]int, int) (int, error) { return b.n, b.err }

func TestPlaceErrors(t *testing.T) {
	p, err := MinSizePartitioner(256<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	w := func(name string, shape ...int) VarSpec { return VarSpec{Name: name, Shape: shape, DType: kernels.F32} }
	cases := []struct {
		vars    []VarSpec
		servers int
		p       Partitioner
		want    string
	}{
		{[]VarSpec{w("a", 4)}, 0, p, "ps: Place: servers must be positive, got 0"},
		{[]VarSpec{w("a", 4)}, -2, p, "ps: Place: servers must be positive, got -2"},
		{[]VarSpec{w("a", 4)}, 2, nil, "ps: Place: nil partitioner"},
		{[]VarSpec{w("a", 4), w("b", 4), w("a", 8)}, 2, p, `ps: Place: variable "a" appears twice (entries 0 and 2)`},
		{[]VarSpec{w("", 4)}, 2, p, "ps: Place: variable 0 has no name"},
		{[]VarSpec{w("s")}, 2, p, `ps: Place: variable "s": ps: shape is empty (a scalar has no rows to split)`},
		{[]VarSpec{w("z", 4, 0)}, 2, p, `ps: Place: variable "z": ps: shape [4 0]: every dimension must be positive`},
		{[]VarSpec{{Name: "d", Shape: []int{4}}}, 2, p, `ps: Place: variable "d": invalid dtype dtype(0)`},
		{[]VarSpec{w("a", 4)}, 2, badPartitioner{n: 5}, `ps: Place: variable "a": partitioner chose 5 shards for 4 rows`},
		{[]VarSpec{w("a", 4)}, 2, badPartitioner{n: 0}, `ps: Place: variable "a": partitioner chose 0 shards for 4 rows`},
		{[]VarSpec{w("a", 4)}, 2, badPartitioner{err: errors.New("boom")}, `ps: Place: variable "a": boom`},
	}
	for _, c := range cases {
		_, err := Place(c.vars, c.servers, c.p)
		if err == nil || err.Error() != c.want {
			t.Errorf("Place(%v, %d, %v) = error %v, want %q", c.vars, c.servers, c.p, err, c.want)
		}
	}
	// Nothing to place is no error.
	pl, err := Place(nil, 3, p)
	if err != nil || len(pl.Vars) != 0 || !reflect.DeepEqual(pl.ServerBytes(), []int64{0, 0, 0}) {
		t.Errorf("Place(nil, 3) = %+v, %v; want an empty placement on 3 servers", pl, err)
	}
}
