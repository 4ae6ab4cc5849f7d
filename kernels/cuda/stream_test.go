//go:build cuda

package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// TestCopyRoundTrip sends random bytes host → device → device → host, from
// and to both pinned and ordinary memory, at odd sizes and offsets.
func TestCopyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	s := newStream(t)
	for _, n := range []int{0, 1, 7, 4096, 1<<20 + 13} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		a, b := alloc(t, n+3), alloc(t, n+5)
		pin, err := gpu.AllocPinned(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(pin.Bytes()) != n {
			t.Fatalf("pinned buffer has %d bytes, want %d", len(pin.Bytes()), n)
		}
		copy(pin.Bytes(), data)
		// pinned → a+3 → b+5 → ordinary; ordinary → a → pinned
		if err := s.CopyHtoD(a.Ptr+3, pin.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := s.CopyDtoD(b.Ptr+5, a.Ptr+3, n); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := s.CopyDtoH(got, b.Ptr+5); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("n=%d: pinned → device → device → host round trip differs", n)
		}
		clear(pin.Bytes())
		if err := s.CopyHtoD(a.Ptr, data); err != nil {
			t.Fatal(err)
		}
		if err := s.CopyDtoH(pin.Bytes(), a.Ptr); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pin.Bytes(), data) {
			t.Fatalf("n=%d: host → device → pinned round trip differs", n)
		}
		if err := gpu.FreePinned(pin); err != nil {
			t.Fatal(err)
		}
		if pin.Bytes() != nil {
			t.Fatal("Bytes of a freed Pinned is not nil")
		}
		if err := gpu.FreePinned(pin); err != nil {
			t.Fatalf("second FreePinned: %v", err)
		}
	}
}

// TestMemset zeroes a sub-range and leaves the bytes around it alone.
func TestMemset(t *testing.T) {
	s := newStream(t)
	n := 1000
	data := bytes.Repeat([]byte{0x5a}, n)
	img := upload(t, s, data, 3)
	if err := s.Memset(img.ptr()+1, n-2); err != nil {
		t.Fatal(err)
	}
	got := img.download(t, s)
	want := append(append([]byte{0x5a}, make([]byte, n-2)...), 0x5a)
	if !bytes.Equal(got, want) {
		t.Fatal("Memset zeroed the wrong bytes")
	}
}

// TestAllocZero checks that empty allocations work and free.
func TestAllocZero(t *testing.T) {
	b, err := gpu.Alloc(0)
	if err != nil || b.Ptr != 0 || b.Bytes != 0 {
		t.Fatalf("Alloc(0) = %+v, %v", b, err)
	}
	if err := gpu.Free(b); err != nil {
		t.Fatal(err)
	}
	p, err := gpu.AllocPinned(0)
	if err != nil || p.Bytes() != nil {
		t.Fatalf("AllocPinned(0) = %v, %v", p.Bytes(), err)
	}
	if err := gpu.FreePinned(p); err != nil {
		t.Fatal(err)
	}
}

// TestEventOrdering makes a second stream wait, through an event, for a
// copy on the first, then reduce the copied data; and times the work.
func TestEventOrdering(t *testing.T) {
	const n = 1 << 22
	s1, s2 := newStream(t), newStream(t)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	src := upload(t, s1, kernels.AsBytes(ones), 0)
	dst := upload(t, s1, make([]byte, 4*n), 0)
	tmp := alloc(t, 4*n)
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	start, copied, done := newEvent(t), newEvent(t), newEvent(t)
	steps := []func() error{
		func() error { return s1.Record(start) },
		func() error { return s1.CopyDtoD(tmp.Ptr, src.ptr(), 4*n) },
		func() error { return s1.Record(copied) },
		func() error { return s2.WaitEvent(copied) },
		func() error { return gpu.Reduce(s2, kernels.F32, kernels.Sum, dst.ptr(), tmp.Ptr, n) },
		func() error { return s2.Record(done) },
		func() error { return done.Synchronize() },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	got := kernels.FromBytes[float32](dst.download(t, s2))
	for i, v := range got {
		if v != 1 {
			t.Fatalf("element %d = %v, want 1: the reduce did not wait for the copy", i, v)
		}
	}
	d, err := done.Elapsed(start)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Fatalf("elapsed %v, want > 0", d)
	}
	t.Logf("copy + reduce of %d MiB: %v", 4*n>>20, d)
}

// newEvent returns an event of gpu that is closed when t ends.
func newEvent(t testing.TB) *Event {
	t.Helper()
	e, err := gpu.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// TestSharedPrimaryContext opens a second Context on the same GPU, uses
// memory of one with the other, and closes it: the shared primary context
// and everything allocated through gpu must survive.
func TestSharedPrimaryContext(t *testing.T) {
	c2, err := Open(gpu.Ordinal())
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(t)
	data := []byte("shared primary context")
	img := upload(t, s, data, 0)
	s2, err := c2.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	// Device memory belongs to the primary context, not to a Context.
	if err := c2.Reduce(s2, kernels.U8, kernels.Max, img.ptr(), img.ptr(), len(data)); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := img.download(t, s); !bytes.Equal(got, data) {
		t.Fatalf("after closing the second Context: %q, want %q", got, data)
	}
}
