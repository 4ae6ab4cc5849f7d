package shm

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestFolderSplitsNoElement feeds a payload to a folder in runs cut at
// random bytes, as a ring's end and its pieces cut it, for elements of
// 1, 2, 4 and 8 bytes: reduce must only ever see whole elements, each
// folded into the right place, and together all of them.
func TestFolderSplitsNoElement(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, esz := range []int{1, 2, 4, 8} {
		for trial := range 50 {
			n := esz * (1 + rng.IntN(300))
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			dst := bytes.Repeat([]byte{1}, n)
			want := make([]byte, n)
			for i := range want {
				want[i] = 1 + src[i]
			}
			f := folder{dst: dst, esz: esz, reduce: func(d, s []byte) {
				if len(d) != len(s) || len(s)%esz != 0 {
					t.Fatalf("esz %d: reduce of %d bytes into %d", esz, len(s), len(d))
				}
				for i := range s {
					d[i] += s[i]
				}
			}}
			for p := src; len(p) > 0; {
				k := min(len(p), rng.IntN(2*esz+3))
				f.add(p[:k])
				p = p[k:]
			}
			if len(f.dst) != 0 || f.nc != 0 || !bytes.Equal(dst, want) {
				t.Fatalf("esz %d, trial %d: %d bytes unfolded, %d carried, sums right: %v", esz, trial, len(f.dst), f.nc, bytes.Equal(dst, want))
			}
		}
	}
}
