//go:build cuda

package cuda

import (
	"errors"
	"math"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// TestArgumentErrors checks that bad arguments give errors wrapping the
// right sentinels, and enqueue nothing.
func TestArgumentErrors(t *testing.T) {
	s := newStream(t)
	buf := alloc(t, 1024)
	p := buf.Ptr
	closed, err := gpu.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatalf("second Stream.Close: %v", err)
	}
	cases := []struct {
		name string
		err  error
		want []error
	}{
		{"nil stream", gpu.Reduce(nil, kernels.F32, kernels.Sum, p, p, 1), []error{ErrArgument}},
		{"closed stream", gpu.Reduce(closed, kernels.F32, kernels.Sum, p, p, 1), []error{ErrClosed}},
		{"negative n", gpu.Reduce(s, kernels.F32, kernels.Sum, p, p, -1), []error{ErrArgument}},
		{"zero dtype", gpu.Reduce(s, 0, kernels.Sum, p, p, 1), []error{ErrUnsupported, kernels.ErrDType}},
		{"bad dtype", gpu.Reduce(s, 99, kernels.Sum, p, p, 1), []error{ErrUnsupported, kernels.ErrDType}},
		{"bad op", gpu.Reduce(s, kernels.F32, 0, p, p, 1), []error{ErrUnsupported, kernels.ErrOp}},
		{"misaligned dst", gpu.Reduce(s, kernels.F32, kernels.Sum, p+2, p+4, 1), []error{ErrArgument, kernels.ErrAlign}},
		{"misaligned src", gpu.Reduce(s, kernels.F64, kernels.Sum, p, p+4, 1), []error{ErrArgument, kernels.ErrAlign}},
		{"null dst", gpu.Reduce(s, kernels.F32, kernels.Sum, 0, p, 1), []error{ErrArgument}},
		{"scale nil stream", gpu.Scale(nil, kernels.F32, p, 1, 2), []error{ErrArgument}},
		{"scale negative n", gpu.Scale(s, kernels.F32, p, -1, 2), []error{ErrArgument}},
		{"scale int NaN", gpu.Scale(s, kernels.I32, p, 1, math.NaN()), []error{ErrArgument, kernels.ErrFactor}},
		{"scale int Inf", gpu.Scale(s, kernels.U8, p, 1, math.Inf(1)), []error{ErrArgument, kernels.ErrFactor}},
		{"scale bad dtype", gpu.Scale(s, 42, p, 1, 2), []error{ErrUnsupported, kernels.ErrDType}},
		{"convert i32", gpu.Convert(s, p, kernels.F16, p+512, kernels.I32, 1), []error{ErrUnsupported}},
		{"convert f16 bf16", gpu.Convert(s, p, kernels.BF16, p+512, kernels.F16, 1), []error{ErrUnsupported}},
		{"convert misaligned", gpu.Convert(s, p, kernels.F16, p+2, kernels.F32, 1), []error{ErrArgument, kernels.ErrAlign}},
		{"convert nil stream", gpu.Convert(nil, p, kernels.F16, p+512, kernels.F32, 1), []error{ErrArgument}},
		{"copy negative", s.CopyDtoD(p, p+512, -1), []error{ErrArgument}},
		{"copy null", s.CopyDtoD(0, p, 8), []error{ErrArgument}},
		{"copy nil stream", (*Stream)(nil).CopyHtoD(p, []byte{1}), []error{ErrArgument}},
		{"memset closed", closed.Memset(p, 8), []error{ErrClosed}},
		{"record nil", s.Record(nil), []error{ErrArgument}},
		{"alloc negative", func() error { _, err := gpu.Alloc(-1); return err }(), []error{ErrArgument}},
		{"pinned negative", func() error { _, err := gpu.AllocPinned(-1); return err }(), []error{ErrArgument}},
		{"open -1", func() error { _, err := Open(-1); return err }(), []error{ErrNoDevice}},
		{"open count", func() error {
			n, err := DeviceCount()
			if err != nil {
				return err
			}
			_, err = Open(n)
			return err
		}(), []error{ErrNoDevice}},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !errors.Is(c.err, w) {
				t.Errorf("%s: %v does not wrap %v", c.name, c.err, w)
			}
		}
		if msg := c.err.Error(); len(msg) < 6 || (msg[:6] != "cuda: " && msg[:9] != "kernels: ") {
			t.Errorf("%s: message %q lacks the package prefix", c.name, msg)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatalf("stream broken by bad calls: %v", err)
	}
}

// TestZeroCountsNeedNoPointers checks that empty operations accept null
// pointers and do nothing.
func TestZeroCountsNeedNoPointers(t *testing.T) {
	s := newStream(t)
	for _, err := range []error{
		gpu.Reduce(s, kernels.F32, kernels.Sum, 0, 0, 0),
		gpu.Reduce(s, kernels.BF16, kernels.Average, 0, 0, 0),
		gpu.Scale(s, kernels.I64, 0, 0, 0.5),
		gpu.Convert(s, 0, kernels.F16, 0, kernels.F32, 0),
		s.CopyDtoD(0, 0, 0),
		s.CopyHtoD(0, nil),
		s.CopyDtoH(nil, 0),
		s.Memset(0, 0),
	} {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestClosedContext checks that a closed Context refuses work, closes
// twice, and leaves other Contexts of its GPU working.
func TestClosedContext(t *testing.T) {
	c, err := Open(gpu.Ordinal())
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc on a closed Context: %v, want ErrClosed", err)
	}
	if _, err := c.NewStream(); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewStream on a closed Context: %v, want ErrClosed", err)
	}
	b := alloc(t, 16) // gpu still works
	if err := newStream(t).Memset(b.Ptr, 16); err != nil {
		t.Fatal(err)
	}
}
