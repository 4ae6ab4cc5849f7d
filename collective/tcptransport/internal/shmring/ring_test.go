package shmring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// pair returns both sides of a fresh ring of the largest capacity.
func pair(t *testing.T) (w, r *Ring) {
	t.Helper()
	return pairOf(t, MaxCapacity)
}

// pairOf returns both sides of a fresh ring of the given capacity: the
// creator's mapping, which writes, and a second mapping opened as a peer
// would, which reads.
func pairOf(t *testing.T, capacity int) (w, r *Ring) {
	t.Helper()
	w, f, token, err := Create(capacity)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err = Open("/proc", OfferPath(f), token)
	if err != nil {
		w.Unmap()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Unmap(); r.Unmap() })
	return w, r
}

func never() bool   { return false }
func noStop() error { return nil }

// TestStreamWraps writes messages from empty to several times the ring's
// capacity while a reader reads them, polling or not, so the ring wraps
// many times and the writer waits for room; every byte must arrive.
func TestStreamWraps(t *testing.T) {
	for _, capacity := range []int{MinCapacity, 1 << 20, MaxCapacity} {
		streamWraps(t, capacity)
	}
}

// streamWraps is TestStreamWraps for rings of one capacity.
func streamWraps(t *testing.T, capacity int) {
	sizes := []int{0, 1, 7, Piece - 1, Piece + 3, capacity - 1, capacity, capacity + 1, 3*capacity + 5, 100}
	for _, spin := range []time.Duration{0, time.Millisecond} {
		for _, yield := range []bool{false, true} {
			w, r := pairOf(t, capacity)
			msgs := randomMessages(sizes)
			done := make(chan error, 1)
			go func() {
				for _, m := range msgs {
					if err := w.Write(m, Poll{Spin: spin, Yield: yield}, noStop); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i, m := range msgs {
				got := make([]byte, len(m))
				if err := r.Read(got, Poll{Spin: spin, Yield: yield}, never, noStop); err != nil {
					t.Fatalf("capacity %d, spin %v yield %v: message %d: %v", capacity, spin, yield, i, err)
				}
				if !bytes.Equal(got, m) {
					t.Fatalf("capacity %d, spin %v yield %v: message %d of %d bytes differs", capacity, spin, yield, i, len(m))
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// randomMessages returns a message of random bytes for each size, the same
// every time.
func randomMessages(sizes []int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([][]byte, len(sizes))
	for i, n := range sizes {
		msgs[i] = make([]byte, n)
		for j := range msgs[i] {
			msgs[i][j] = byte(rng.Uint32())
		}
	}
	return msgs
}

// TestReadDrainsThenGone: once the writer is gone, Read still delivers
// what it wrote and only then reports ErrGone, with or without polling.
func TestReadDrainsThenGone(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Hour} {
		w, r := pair(t)
		if err := w.Write([]byte("last words"), Poll{}, noStop); err != nil {
			t.Fatal(err)
		}
		gone := func() bool { return true }
		got := make([]byte, 10)
		if err := r.Read(got, Poll{Spin: spin}, gone, noStop); err != nil || string(got) != "last words" {
			t.Fatalf("spin %v: Read = %q, %v; want what was written", spin, got, err)
		}
		if err := r.Read(got, Poll{Spin: spin}, gone, noStop); !errors.Is(err, ErrGone) {
			t.Errorf("spin %v: Read past the end = %v, want ErrGone", spin, err)
		}
	}
}

// TestStopEndsWaits: a Write waiting for room (polling first, with an
// hour's budget) and a Read waiting for data end with stop's error once
// stop reports one and the sleeper is woken.
func TestStopEndsWaits(t *testing.T) {
	w, _ := pair(t) // nobody reads: the writer fills the ring and waits
	_, r := pair(t) // nobody writes: the reader waits
	errStop := errors.New("stopped")
	var stopped atomic.Bool
	stop := func() error {
		if stopped.Load() {
			return errStop
		}
		return nil
	}
	wrote, read := make(chan error, 1), make(chan error, 1)
	go func() { wrote <- w.Write(make([]byte, w.Capacity()+1), Poll{Spin: time.Hour, Yield: true}, stop) }()
	go func() { read <- r.Read(make([]byte, 1), Poll{}, never, stop) }()
	time.Sleep(20 * time.Millisecond)
	stopped.Store(true)
	w.WakeWriter()
	r.WakeReader()
	for name, ch := range map[string]chan error{"Write": wrote, "Read": read} {
		select {
		case err := <-ch:
			if !errors.Is(err, errStop) {
				t.Errorf("%s: %v, want the stop error", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waiting 5s after stop", name)
		}
	}
}

// TestWriteVec: frames written as several parts at once (a header and its
// payload, or many pieces) arrive as their concatenation, through
// wrap-arounds, parts larger than Piece and than the ring, empty parts,
// and a reader that reads in pieces of other sizes.
func TestWriteVec(t *testing.T) {
	const capacity = MinCapacity
	frames := [][]int{{16, 0}, {16, 40, 4096}, {0}, {16, Piece + 9}, {3, capacity + 1, 0, 5}, {16, 7}, {2*capacity + 3, 1, capacity - 1}}
	w, r := pairOf(t, capacity)
	var want []byte
	var parts [][][]byte
	for _, sizes := range frames {
		ps := randomMessages(sizes)
		parts = append(parts, ps)
		for _, p := range ps {
			want = append(want, p...)
		}
	}
	done := make(chan error, 1)
	go func() {
		for _, ps := range parts {
			if err := w.WriteVec(ps, Poll{}, noStop); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	got := make([]byte, 0, len(want))
	for chunk := 1; len(got) < len(want); chunk = chunk*3 + 1 {
		buf := make([]byte, min(chunk%50000+1, len(want)-len(got)))
		if err := r.Read(buf, Poll{}, never, noStop); err != nil {
			t.Fatal(err)
		}
		got = append(got, buf...)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), len(want))
	}
}

// TestReadFunc streams messages of awkward sizes through a small ring and
// reads them with ReadFunc: the runs it hands out, wrapped around the
// ring's end or not, make up each message in order.
func TestReadFunc(t *testing.T) {
	w, r := pairOf(t, MinCapacity)
	msgs := randomMessages([]int{1, 7, MinCapacity - 3, MinCapacity, 3*MinCapacity + 5, Piece + 1, 24})
	done := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := w.Write(m, Poll{}, noStop); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i, m := range msgs {
		var got []byte
		err := r.ReadFunc(len(m), func(p []byte) {
			if len(p) == 0 || len(p) > Piece {
				t.Errorf("message %d: a run of %d bytes", i, len(p))
			}
			got = append(got, p...)
		}, Poll{}, never, noStop)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, m) {
			t.Fatalf("message %d (%d bytes) read back wrong", i, len(m))
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
