package engine

import (
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

func TestPlanBatches(t *testing.T) {
	f32 := fusionClass{dtype: kernels.F32, op: kernels.Sum}
	f64 := fusionClass{dtype: kernels.F64, op: kernels.Sum}
	avg := fusionClass{dtype: kernels.F32, op: kernels.Average}
	scaled := fusionClass{dtype: kernels.F32, op: kernels.Sum, pre: 0.5}
	it := func(c fusionClass, n int64) planItem { return planItem{fusable: true, class: c, bytes: n} }
	other := planItem{bytes: 8}
	grp := func(c fusionClass, n int64, g uint64) planItem { p := it(c, n); p.group = g; return p }
	for _, c := range []struct {
		name      string
		items     []planItem
		threshold int64
		want      string
	}{
		{"empty", nil, 100, "[]"},
		{"all fit", []planItem{it(f32, 10), it(f32, 20), it(f32, 30)}, 100, "[[0 1 2]]"},
		{"exactly the threshold", []planItem{it(f32, 50), it(f32, 50), it(f32, 1)}, 100, "[[0 1] [2]]"},
		{"split by size", []planItem{it(f32, 60), it(f32, 30), it(f32, 20), it(f32, 70)}, 100, "[[0 1] [2 3]]"},
		{"classes apart", []planItem{it(f32, 1), it(f64, 1), it(f32, 1), it(avg, 1), it(scaled, 1), it(f64, 1)}, 100, "[[0 2] [1 5] [3] [4]]"},
		{"other kinds alone", []planItem{it(f32, 1), other, it(f32, 1), other}, 100, "[[0 2] [1] [3]]"},
		{"too large alone", []planItem{it(f32, 10), it(f32, 500), it(f32, 10)}, 100, "[[0 2] [1]]"},
		{"disabled", []planItem{it(f32, 1), it(f32, 1), other}, 0, "[[0] [1] [2]]"},
		{"group kept whole", []planItem{it(f32, 60), grp(f32, 30, 9), it(f32, 5), grp(f32, 30, 9)}, 100, "[[0] [1 3 2]]"},
		{"group larger than threshold", []planItem{grp(f32, 80, 9), grp(f32, 80, 9), it(f32, 5)}, 100, "[[0 1] [2]]"},
		{"group across classes", []planItem{grp(f32, 1, 4), grp(f64, 1, 4), grp(f32, 1, 4)}, 100, "[[0 2] [1]]"},
		{"large alone in place", []planItem{it(f32, 10), it(f32, soloBytes), it(f32, 10), it(f32, soloBytes-1)}, 64 << 20, "[[0 2 3] [1]]"},
		{"large group members fused", []planItem{grp(f32, soloBytes, 9), grp(f32, soloBytes, 9), it(f32, 5)}, 64 << 20, "[[0 1 2]]"},
		{"group unfused when disabled", []planItem{grp(f32, 1, 4), grp(f32, 1, 4)}, 0, "[[0] [1]]"},
	} {
		if got := fmt.Sprint(planBatches(c.items, c.threshold)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

// TestPlanBatchesCoversEveryItemOnce over many random mixes.
func TestPlanBatchesCoversEveryItemOnce(t *testing.T) {
	classes := []fusionClass{{dtype: kernels.F32, op: kernels.Sum}, {dtype: kernels.F16, op: kernels.Max}}
	for seed := range 200 {
		var items []planItem
		for i := range seed % 37 {
			items = append(items, planItem{fusable: (i*seed)%5 != 0, class: classes[(i+seed)%2],
				bytes: int64((i*7919 + seed) % 130), group: uint64((i * seed) % 3 % 2)})
		}
		seen := make([]int, len(items))
		for _, b := range planBatches(items, 100) {
			var n int64
			for _, i := range b {
				seen[i]++
				n += items[i].bytes
				if items[i].class != items[b[0]].class || (len(b) > 1 && !items[i].fusable) {
					t.Fatalf("seed %d: batch %v mixes", seed, b)
				}
			}
			if n > 100 && len(b) > 1 && items[b[0]].group == 0 {
				t.Fatalf("seed %d: batch %v holds %d bytes", seed, b, n)
			}
		}
		for i, s := range seen {
			if s != 1 {
				t.Fatalf("seed %d: item %d in %d batches", seed, i, s)
			}
		}
	}
}
