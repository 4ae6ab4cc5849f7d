package shmring

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// withStreamMin runs f with streamMin set to min, as a ring write sees it.
func withStreamMin(t *testing.T, min int, f func()) {
	t.Helper()
	old := streamMin
	streamMin = min
	defer func() { streamMin = old }()
	f()
}

// TestFillCopiesEveryLayout fills runs of many lengths, at every offset
// of the destination within a cache line and at several offsets of the
// source, streaming from the first byte and at the shipped threshold: the
// run must arrive whole, and no byte around it may change.
func TestFillCopiesEveryLayout(t *testing.T) {
	lengths := []int{0, 1, 31, 63, 64, 65, 127, 128, 129, 191, 4096, 16<<10 - 1, 16 << 10, 16<<10 + 77, 100003}
	src := make([]byte, 100003+16)
	for i := range src {
		src[i] = byte(rand.IntN(255) + 1) // never the guard byte 0
	}
	dst := make([]byte, 100003+256)
	base := int(-uintptr(unsafe.Pointer(&dst[0])) & 63) // dst[base] starts a line
	zero := func(b []byte) bool { return !bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) }
	for _, min := range []int{1, streamMin} {
		withStreamMin(t, min, func() {
			for _, n := range lengths {
				for doff := 0; doff < 64; doff++ {
					for _, soff := range []int{0, 1, 8, 13} {
						at := base + 64 + doff
						fill(dst[at:at+n], src[soff:soff+n])
						name := fmt.Sprintf("streamMin %d, %d bytes at line offset %d from source offset %d", min, n, doff, soff)
						if !bytes.Equal(dst[at:at+n], src[soff:soff+n]) {
							t.Fatalf("%s: the run differs", name)
						}
						if !zero(dst[:at]) || !zero(dst[at+n:at+n+128]) {
							t.Fatalf("%s: a byte outside the run changed", name)
						}
						clear(dst[at : at+n])
					}
				}
			}
		})
	}
}

// TestStreamWrapsStreaming is TestStreamWraps with every run of a write
// streamed, the shortest included, as the ring wraps.
func TestStreamWrapsStreaming(t *testing.T) {
	withStreamMin(t, 1, func() {
		for _, capacity := range []int{MinCapacity, MaxCapacity} {
			streamWraps(t, capacity)
		}
	})
}
