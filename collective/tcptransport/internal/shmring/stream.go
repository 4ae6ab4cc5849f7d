package shmring

import (
	"time"
	"unsafe"
)

// streamMin is the least run of bytes that a writer may copy into the ring
// with non-temporal stores, which send whole cache lines to memory past
// the writer's caches, in place of copy's stores (see filler). Below it
// the clock reads of a timed run would cost more than the choice can
// gain.
const streamMin = 16 << 10

// Which of the two ways a filler copies a long run: copy's stores, or
// streaming ones.
const (
	byCopy = iota
	byStream
)

// A filler is a ring writer's choice, for runs of streamMin bytes and
// more, between copy and streaming stores, by the speed it measures of
// each. Neither is faster everywhere. An ordinary store to a ring line
// must first take the line from the reader's cache, which holds it since
// it last read there; where the two processors share a cache that is
// cheap and the reader then finds the line there, where they do not it
// is a round trip between them for every 64 bytes. Streaming stores skip
// both: the lines go to memory and the reader loads them from there.
//
// The 2-CPU test VM (AMD EPYC family 26 under Firecracker) ran in both
// conditions on one day (2026-11-30), changing between launches. A
// writer thread copying 256 KiB pieces into a 4 MiB ring, another reading
// them out: where a cache line bounced between the two processors took
// 460-540 ns a round trip, the pair moved 6.6-9.4 GB/s with copy against
// 15.6-19.0 streaming (the writer's copies alone 6.7-9.5 against 19.6-28.9);
// where it took 160-220 ns, 26.8-28.5 against 14.4. A build that always
// streamed, against the one before, two ranks' all-reduce over shared
// memory (interleaved launches): 1 MiB 83 against 179 µs in the first
// condition and 122 against 56 in the second.
//
// So each writer measures (and streams only where that is clearly faster,
// see streamMargin): one long run in sampleEvery is timed, and
// one timed run in probeEvery goes the way not chosen, so that its
// estimate follows a change of condition; each way's estimate is a moving
// average of its timed runs' nanoseconds per KiB (see record). Until both ways have
// an estimate, every long run is timed and they take turns. In the first
// condition (three interleaved launches) two ranks' 1 MiB all-reduce took
// 89 µs this way, 84 always streaming and 190 never; 64 KiB 6.3, 6.1 and
// 13.5.
type filler struct {
	cost [2]float64 // nanoseconds per KiB of each way; 0: not measured yet
	runs uint32     // long runs copied
	pick int        // the way with the lower cost
}

const (
	// sampleEvery: one long run in this many is timed (two clock reads,
	// about 80 ns on the test VM, a tenth of a 16 KiB copy at 20 GB/s,
	// which one run in this many pays).
	sampleEvery = 8
	// probeEvery: one timed run in this many goes the way not chosen.
	probeEvery = 4
)

// fill copies src into dst, of the same length: a run shorter than
// streamMin with copy, a longer one the way f chooses (see filler).
func (f *filler) fill(dst, src []byte) {
	if !haveStream || len(src) < streamMin {
		copy(dst, src)
		return
	}
	way, timed := f.next()
	if forceWay >= 0 {
		way, timed = forceWay, false
	}
	if !timed {
		fillWay(way, dst, src)
		return
	}
	start := time.Now()
	fillWay(way, dst, src)
	f.record(way, time.Since(start), len(src))
}

// forceWay, when not negative, is the way every long run goes, for tests.
var forceWay = -1

// next counts a long run and says which way it goes and whether it is
// timed.
func (f *filler) next() (way int, timed bool) {
	f.runs++
	switch {
	case f.cost[byCopy] == 0 || f.cost[byStream] == 0:
		return int(f.runs % 2), true
	case f.runs%sampleEvery != 0:
		return f.pick, false
	case f.runs/sampleEvery%probeEvery == 0:
		return 1 - f.pick, true
	}
	return f.pick, true
}

// record adds a timed run of n bytes that took d to way's estimate. A
// sample is cut to twice the estimate, so that a run preempted midway
// moves it by a quarter at most; a lasting change still shows within a
// few (each such sample multiplies the estimate by 1.25).
func (f *filler) record(way int, d time.Duration, n int) {
	c := float64(d) * 1024 / float64(n)
	switch old := f.cost[way]; {
	case old == 0:
		f.cost[way] = max(c, 1e-3)
	default:
		f.cost[way] = old + (min(c, 2*old)-old)/4
	}
	if f.cost[byCopy] > 0 && f.cost[byStream] > 0 {
		f.pick = byCopy
		if f.cost[byStream] < streamMargin*f.cost[byCopy] {
			f.pick = byStream
		}
	}
}

// streamMargin: streaming is chosen only where its runs take less than
// this share of copy's. The writer's clock sees only its own side: a
// streamed line costs the reader a load from memory where a copied one
// may be in a cache they share. Two ranks on the test VM where its
// processors shared one (a cache line's round trip 185-269 ns), with the
// writer picking the faster way with no margin: 64 KiB all-reduce 3.7, 5.2
// and 6.9 µs in three launches against 3.6-3.7 with copy only and 6.9-7.0
// streaming only, 16 MiB 1.60-1.78 ms against 1.26-1.41 and 2.14-2.18;
// where they did not, the writer's streamed runs took a fifth to a half
// of its copied ones' time.
const streamMargin = 0.6

// fillWay copies src into dst the given way: with copy, or with copy up
// to dst's first cache line boundary, streaming stores (streamLines) for
// the whole lines after it, and copy for the rest. streamLines ends with
// a store fence, so the lines are visible before the head that publishes
// them.
func fillWay(way int, dst, src []byte) {
	n := len(src)
	if way == byCopy || !haveStream || n == 0 {
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
