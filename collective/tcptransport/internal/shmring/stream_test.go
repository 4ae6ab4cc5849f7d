package shmring

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// TestFillCopiesEveryLayout copies runs of many lengths both ways, at
// every offset of the destination within a cache line and at several
// offsets of the source: the run must arrive whole, and no byte around
// it may change.
func TestFillCopiesEveryLayout(t *testing.T) {
	lengths := []int{0, 1, 31, 63, 64, 65, 127, 128, 129, 191, 4096, streamMin - 1, streamMin, streamMin + 77, 100003}
	src := make([]byte, 100003+16)
	for i := range src {
		src[i] = byte(rand.IntN(255) + 1) // never the guard byte 0
	}
	dst := make([]byte, 100003+256)
	base := int(-uintptr(unsafe.Pointer(&dst[0])) & 63) // dst[base] starts a line
	zero := func(b []byte) bool { return !bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) }
	for _, way := range []int{byCopy, byStream} {
		for _, n := range lengths {
			for doff := 0; doff < 64; doff++ {
				for _, soff := range []int{0, 1, 8, 13} {
					at := base + 64 + doff
					fillWay(way, dst[at:at+n], src[soff:soff+n])
					name := fmt.Sprintf("way %d, %d bytes at line offset %d from source offset %d", way, n, doff, soff)
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
	}
}

// TestStreamWrapsEachWay is TestStreamWraps with every long run of a
// write going one way, copy or streaming stores, as the ring wraps.
func TestStreamWrapsEachWay(t *testing.T) {
	t.Cleanup(func() { forceWay = -1 })
	for _, way := range []int{byCopy, byStream} {
		forceWay = way
		for _, capacity := range []int{MinCapacity, MaxCapacity} {
			streamWraps(t, capacity)
		}
	}
}

// TestFillerSchedule: until both ways have an estimate every long run is
// timed and the ways take turns; then one run in sampleEvery is timed, one
// timed run in probeEvery goes the way not chosen, and the rest go the
// chosen way.
func TestFillerSchedule(t *testing.T) {
	var f filler
	for i := range 2 {
		way, timed := f.next()
		if !timed || way != (i+1)%2 {
			t.Fatalf("run %d before both estimates: way %d timed %v, want way %d timed", i+1, way, timed, (i+1)%2)
		}
		f.record(way, time.Microsecond, 16<<10)
	}
	for range 8 {
		f.record(byStream, 0, 16<<10) // streaming now far the cheaper
	}
	if f.pick != byStream {
		t.Fatalf("pick %d after streaming measured cheaper, want %d", f.pick, byStream)
	}
	const runs = sampleEvery * probeEvery * 10
	var timedRuns, probes, chosen int
	for range runs {
		way, timed := f.next()
		switch {
		case way != f.pick && !timed:
			t.Fatalf("run %d goes the way not chosen untimed", f.runs)
		case way != f.pick:
			probes++
		default:
			chosen++
		}
		if timed {
			timedRuns++
		}
	}
	if timedRuns != runs/sampleEvery || probes != runs/sampleEvery/probeEvery || chosen != runs-probes {
		t.Errorf("%d runs: %d timed, %d probes, %d the chosen way; want %d, %d, %d",
			runs, timedRuns, probes, chosen, runs/sampleEvery, runs/sampleEvery/probeEvery, runs-runs/sampleEvery/probeEvery)
	}
}

// TestFillerFollowsTheFaster feeds a filler timings in which streaming
// takes a third of copy's time, then more than twice, as in the test VM's
// two conditions: it must pick streaming, then copy within a few probes,
// and a single preempted sample must not turn it.
func TestFillerFollowsTheFaster(t *testing.T) {
	var f filler
	kib := func(ns float64) time.Duration { return time.Duration(ns * 16) } // a 16 KiB run at ns per KiB
	f.record(byCopy, kib(100), 16<<10)
	f.record(byStream, kib(35), 16<<10)
	if f.pick != byStream {
		t.Fatalf("copy 100 ns/KiB, stream 35: pick %d, want streaming", f.pick)
	}
	f.record(byStream, kib(100000), 16<<10) // one run preempted midway
	if f.pick != byStream {
		t.Fatalf("one outlier of streaming turned the pick to copy (costs %v)", f.cost)
	}
	f.record(byStream, kib(35), 16<<10)
	// Streaming a little faster than copy is not enough: the reader pays
	// for streamed lines, which the writer's clock does not see.
	var g filler
	g.record(byCopy, kib(100), 16<<10)
	g.record(byStream, kib(80), 16<<10)
	if g.pick != byCopy {
		t.Errorf("copy 100 ns/KiB, stream 80: pick %d, want copy (streaming only below %v of copy)", g.pick, streamMargin)
	}
	// The condition changes: copy 25 ns/KiB, streaming 60.
	for i := 1; ; i++ {
		f.record(byCopy, kib(25), 16<<10)
		f.record(byStream, kib(60), 16<<10)
		if f.pick == byCopy {
			break
		}
		if i == 6 {
			t.Fatalf("still streaming after %d samples of each at copy 25 ns/KiB, stream 60 (costs %v)", i, f.cost)
		}
	}
}
