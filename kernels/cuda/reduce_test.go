//go:build cuda

package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// TestReduce compares the device Reduce with kernels.Reduce for every dtype
// and operator (Average included: it must reduce as Sum) at every placement.
// Results must be equal bit for bit, except that two NaNs are equal whatever
// their payloads (see firstDiff).
func TestReduce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, dt := range kernels.DTypes {
		for _, op := range kernels.Ops {
			t.Run(fmt.Sprintf("%s/%s", dt, op), func(t *testing.T) {
				s := newStream(t)
				for _, p := range placements(dt.Size()) {
					a, b := randomElems(r, dt, p.n), randomElems(r, dt, p.n)
					checkReduce(t, s, dt, op, a, b, p)
				}
			})
		}
	}
}

// checkReduce reduces b into a on the device and on the CPU and compares.
func checkReduce(t *testing.T, s *Stream, dt kernels.DType, op kernels.Op, a, b []byte, p placement) {
	t.Helper()
	dst, src := upload(t, s, a, p.dstOff), upload(t, s, b, p.srcOff)
	if err := gpu.Reduce(s, dt, op, dst.ptr(), src.ptr(), p.n); err != nil {
		t.Fatalf("%v: %v", p, err)
	}
	got := dst.download(t, s)
	if !bytes.Equal(src.download(t, s), b) {
		t.Fatalf("%v: src changed", p)
	}
	want := bytes.Clone(a)
	if err := kernels.Reduce(dt, op, want, b); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(dt, got, want, true); i >= 0 {
		sz := dt.Size()
		e := i * sz
		t.Fatalf("%v: element %d: %s(%x, %x) = %x, want %x", p, i, op, a[e:e+sz], b[e:e+sz], got[e:e+sz], want[e:e+sz])
	}
}

// TestReduceAliased reduces a buffer with itself (dst == src is allowed).
func TestReduceAliased(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	s := newStream(t)
	for _, dt := range kernels.DTypes {
		for _, op := range []kernels.Op{kernels.Sum, kernels.Min, kernels.Max, kernels.Prod} {
			n := 10007
			a := randomElems(r, dt, n)
			buf := upload(t, s, a, 0)
			if err := gpu.Reduce(s, dt, op, buf.ptr(), buf.ptr(), n); err != nil {
				t.Fatal(err)
			}
			got := buf.download(t, s)
			want := bytes.Clone(a)
			if err := kernels.Reduce(dt, op, want, a); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(dt, got, want, true); i >= 0 {
				t.Fatalf("%s %s: element %d differs", dt, op, i)
			}
		}
	}
}

// scaleFactors are the factors TestScale tries: fractions that round,
// negatives, zero, one (a no-op), huge ones that saturate integers and
// overflow halves, and a tiny one that makes subnormals.
var scaleFactors = []float64{0.5, 1.0 / 3, -2.5, 0, 1, 1.0000001, 3.75, 1e10, -1e-3, 1e-30, 1e300}

// TestScale compares the device Scale with kernels.Scale; for floats also
// with NaN and infinite factors. Equal bit for bit, NaN payloads aside.
func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, dt := range kernels.DTypes {
		factors := scaleFactors
		if dt.IsFloat() {
			factors = append(slices.Clone(factors), math.NaN(), math.Inf(1), math.Inf(-1))
		}
		t.Run(dt.String(), func(t *testing.T) {
			s := newStream(t)
			for _, f := range factors {
				for _, p := range placements(dt.Size()) {
					a := randomElems(r, dt, p.n)
					buf := upload(t, s, a, p.dstOff)
					if err := gpu.Scale(s, dt, buf.ptr(), p.n, f); err != nil {
						t.Fatalf("factor %v, %v: %v", f, p, err)
					}
					got := buf.download(t, s)
					want := bytes.Clone(a)
					if err := kernels.Scale(dt, want, f); err != nil {
						t.Fatal(err)
					}
					if i := firstDiff(dt, got, want, true); i >= 0 {
						sz := dt.Size()
						e := i * sz
						t.Fatalf("factor %v, %v: element %d: %x·%v = %x, want %x", f, p, i, a[e:e+sz], f, got[e:e+sz], want[e:e+sz])
					}
				}
			}
		})
	}
}

// cpuConvert runs the CPU converter for from → to.
func cpuConvert(to kernels.DType, dst []byte, from kernels.DType, src []byte) {
	switch {
	case from == to:
		copy(dst, src)
	case from == kernels.F32 && to == kernels.F16:
		kernels.F32ToF16(kernels.FromBytes[kernels.Float16](dst), kernels.FromBytes[float32](src))
	case from == kernels.F16 && to == kernels.F32:
		kernels.F16ToF32(kernels.FromBytes[float32](dst), kernels.FromBytes[kernels.Float16](src))
	case from == kernels.F32 && to == kernels.BF16:
		kernels.F32ToBF16(kernels.FromBytes[kernels.BFloat16](dst), kernels.FromBytes[float32](src))
	case from == kernels.BF16 && to == kernels.F32:
		kernels.BF16ToF32(kernels.FromBytes[float32](dst), kernels.FromBytes[kernels.BFloat16](src))
	}
}

// TestConvert compares the device conversions with the CPU converters, bit
// for bit including NaN payloads (no arithmetic touches a NaN there), on
// random bit patterns of every class and at every placement; the widenings
// also see all 65536 half patterns.
func TestConvert(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	pairs := [][2]kernels.DType{
		{kernels.F32, kernels.F16}, {kernels.F16, kernels.F32},
		{kernels.F32, kernels.BF16}, {kernels.BF16, kernels.F32},
		{kernels.F16, kernels.F16},
	}
	for _, pair := range pairs {
		from, to := pair[0], pair[1]
		t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) {
			s := newStream(t)
			for _, p := range placements(min(from.Size(), to.Size())) {
				src := make([]byte, p.n*from.Size())
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				checkConvert(t, s, to, from, src, p)
			}
			if from.Size() == 2 { // every half bit pattern
				all := make([]kernels.Float16, 1<<16)
				for i := range all {
					all[i] = kernels.Float16(i)
				}
				checkConvert(t, s, to, from, kernels.AsBytes(all), placement{n: len(all)})
			}
		})
	}
}

// checkConvert converts src on the device and on the CPU and compares.
func checkConvert(t *testing.T, s *Stream, to, from kernels.DType, src []byte, p placement) {
	t.Helper()
	want := make([]byte, p.n*to.Size())
	cpuConvert(to, want, from, src)
	// dstOff must be a multiple of the destination element size.
	dstOff := p.dstOff / to.Size() * to.Size()
	srcOff := p.srcOff / from.Size() * from.Size()
	dst, sb := upload(t, s, make([]byte, len(want)), dstOff), upload(t, s, src, srcOff)
	if err := gpu.Convert(s, dst.ptr(), to, sb.ptr(), from, p.n); err != nil {
		t.Fatalf("%v: %v", p, err)
	}
	got := dst.download(t, s)
	if i := firstDiff(to, got, want, false); i >= 0 {
		fs, ts := from.Size(), to.Size()
		t.Fatalf("%v: element %d: %x → %x, want %x", p, i, src[i*fs:(i+1)*fs], got[i*ts:(i+1)*ts], want[i*ts:(i+1)*ts])
	}
}
