package shmring

import "unsafe"

// streamMin is the least run of bytes that a writer copies into the ring
// with non-temporal stores, which send whole cache lines to memory past
// the writer's caches, in place of copy's stores (see fill). A variable so
// that tests may stream every run.
//
// An ordinary store to a ring line must first take the line from the
// reader's cache, which holds it since it last read there: a round trip
// between the two processors for every 64 bytes. Streaming stores skip
// that; the reader then loads the lines from memory. On the 2-CPU test VM
// (AMD EPYC family 26 under Firecracker, in the state where a cache line
// bounced between its two processors takes 460-540 ns a round trip, the
// only one it showed that day) a writer thread copied 256 KiB pieces into
// a 4 MiB ring at 7-9.5 GB/s with copy and at 20-38 GB/s streaming, while
// the reader copied out at 19-25 GB/s either way. Two ranks' all-reduce
// (2026-11-30, four interleaved launches, build with an environment
// variable for the threshold, not kept): never streaming against 4 KiB,
// 16 KiB and 64 KiB thresholds, 4 KiB 2.5 against 2.1, 2.5 and 2.5 µs,
// 16 KiB 5.2 against 3.2, 3.3 and 5.2, 64 KiB 15.2 against 7.2, 7.0 and
// 7.0, 1 MiB 199 against 86, 88 and 88 (Open MPI's shared memory 3.2, 16.8,
// 25.2 and 197). 16 KiB leaves the small frames, whose latency a line
// in the writer's cache may serve better where the processors share one,
// to copy.
var streamMin = 16 << 10

// fill copies src into dst, of the same length: a run shorter than
// streamMin with copy, a longer one with copy up to dst's first cache line
// boundary, streaming stores (streamLines) for the whole lines after it,
// and copy for the rest. streamLines ends with a store fence, so the
// lines are visible before the head that publishes them.
func fill(dst, src []byte) {
	n := len(src)
	if !haveStream || n < streamMin {
		copy(dst, src)
		return
	}
	head := min(n, int(-uintptr(unsafe.Pointer(&dst[0]))&63))
	copy(dst[:head], src)
	lines := (n - head) &^ 63
	if lines > 0 {
		streamLines(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), uintptr(lines))
	}
	copy(dst[head+lines:], src[head+lines:])
}
