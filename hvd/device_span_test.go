package hvd

import (
	"fmt"
	"strings"
	"testing"
)

// TestStageSpans checks that spans cover a tensor exactly, in order, in
// whole elements of at most the chunk size.
func TestStageSpans(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		bytes, elem, chunk int
		want               string // span sizes, or "" to check invariants only
	}{
		{0, 4, 16, "[]"},
		{4, 4, 16, "[4]"},
		{6, 2, 1, "[2 2 2]"}, // a chunk smaller than an element still moves one
		{20, 4, 16, "[16 4]"},
		{24, 8, 20, "[16 8]"}, // the chunk rounds down to whole elements
		{64 * mib, 4, 16 * mib, "[16777216 16777216 16777216 16777216]"},
		{64*mib + 16, 8, 8 * mib, ""},
		{1000*mib + 2, 2, 8 * mib, ""},
		{999, 1, 100, ""},
	} {
		spans := stageSpans(c.bytes, c.elem, c.chunk)
		sizes := []int{}
		off := 0
		for _, s := range spans {
			if s.off != off || s.n <= 0 || s.n%c.elem != 0 || (s.n > c.chunk && s.n != c.elem) {
				t.Errorf("stageSpans(%d, %d, %d): bad span %+v", c.bytes, c.elem, c.chunk, s)
			}
			off += s.n
			sizes = append(sizes, s.n)
		}
		if off != c.bytes {
			t.Errorf("stageSpans(%d, %d, %d) covers %d bytes", c.bytes, c.elem, c.chunk, off)
		}
		if got := fmt.Sprint(sizes); c.want != "" && got != c.want {
			t.Errorf("stageSpans(%d, %d, %d) = %s, want %s", c.bytes, c.elem, c.chunk, got, c.want)
		}
	}
}

// TestSpanNamesDiffer checks that span names carry the tensor name, the
// index and the count, so tensors of different sizes never pair spans.
func TestSpanNamesDiffer(t *testing.T) {
	seen := map[string]bool{}
	for n := 1; n <= 3; n++ {
		for i := range n {
			name := spanName("grad", i, n)
			if seen[name] || !strings.HasPrefix(name, "grad#") {
				t.Errorf("spanName(grad, %d, %d) = %q: duplicate or not prefixed", i, n, name)
			}
			seen[name] = true
		}
	}
}

// TestPinGPU: the ranks of a host take distinct GPUs while there are
// enough, then share them round-robin; without GPUs they use the CPU.
func TestPinGPU(t *testing.T) {
	for _, c := range []struct{ local, count, want int }{
		{0, 4, 0}, {3, 4, 3}, {4, 4, 0}, {5, 2, 1}, {0, 1, 0}, {2, 0, -1},
	} {
		if got := pinGPU(c.local, c.count); got != c.want {
			t.Errorf("pinGPU(%d, %d) = %d, want %d", c.local, c.count, got, c.want)
		}
	}
	seen := map[int]bool{}
	for local := range 8 {
		seen[pinGPU(local, 8)] = true
	}
	if len(seen) != 8 {
		t.Errorf("8 local ranks on 8 GPUs took %d distinct GPUs", len(seen))
	}
}
