package kernels

import (
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

var exhaustive = flag.Bool("kernels.exhaustive", false, "check float32→half narrowing for all 2^32 float32 patterns (slow)")

// sameF32 compares bit patterns, treating any two NaNs as equal.
func sameF32(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestF16DecodeAll(t *testing.T) {
	bulkSrc := make([]Float16, 1<<16)
	for h := range bulkSrc {
		bulkSrc[h] = Float16(h)
	}
	bulk := make([]float32, len(bulkSrc))
	F16ToF32(bulk, bulkSrc)
	for h := range 1 << 16 {
		got := Float16(h).Float32()
		want := float32(fmtF16.refDecode(uint16(h)))
		if !sameF32(got, want) || math.Signbit(float64(got)) != (h&0x8000 != 0) {
			t.Fatalf("Float16(%#04x).Float32() = %g (%#08x), want %g", h, got, math.Float32bits(got), want)
		}
		if math.Float32bits(bulk[h]) != math.Float32bits(got) {
			t.Fatalf("F16ToF32 of %#04x = %#08x, scalar gives %#08x", h, math.Float32bits(bulk[h]), math.Float32bits(got))
		}
	}
}

func TestF16RoundTripAll(t *testing.T) {
	for h := range 1 << 16 {
		back := uint16(ToFloat16(Float16(h).Float32()))
		switch {
		case fmtF16.isNaN16(uint16(h)):
			if !fmtF16.isNaN16(back) || back&0x8000 != uint16(h)&0x8000 || back&0x200 == 0 {
				t.Fatalf("NaN %#04x came back as %#04x, want a quiet NaN of the same sign", h, back)
			}
			if h&0x200 != 0 && back != uint16(h) {
				t.Fatalf("quiet NaN %#04x came back as %#04x", h, back)
			}
		case back != uint16(h):
			t.Fatalf("%#04x round-tripped to %#04x", h, back)
		}
	}
}

func TestBF16DecodeAndRoundTripAll(t *testing.T) {
	for h := range 1 << 16 {
		got := BFloat16(h).Float32()
		if want := float32(fmtBF16.refDecode(uint16(h))); !sameF32(got, want) {
			t.Fatalf("BFloat16(%#04x).Float32() = %g, want %g", h, got, want)
		}
		back := uint16(ToBFloat16(got))
		if fmtBF16.isNaN16(uint16(h)) {
			if !fmtBF16.isNaN16(back) || back&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
		} else if back != uint16(h) {
			t.Fatalf("%#04x round-tripped to %#04x", h, back)
		}
	}
}

// narrowCases returns float32 values that stress rounding for format f: every
// value of the format, the midpoints between neighbours and their float32
// neighbours, plus random bit patterns and random values near the format's range.
func narrowCases(f halfFormat, random int) []float32 {
	var out []float32
	for h := range 1 << 15 { // non-negative patterns; signs are added below
		v := f.refDecode(uint16(h))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		next := f.refDecode(uint16(h + 1)) // Inf for the largest finite value
		if math.IsInf(next, 0) {
			next = math.Ldexp(1, f.maxExp+1)
		}
		mid := float32((v + next) / 2)
		out = append(out, float32(v), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range random {
		out = append(out, math.Float32frombits(r.Uint32()))
		e := f.minExp - f.mantBits - 2 + r.IntN(f.maxExp-f.minExp+f.mantBits+5)
		out = append(out, float32(math.Ldexp(1+r.Float64(), e)))
	}
	out = append(out, 0, float32(math.Inf(1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32)
	n := len(out)
	for i := range n {
		out = append(out, -out[i])
	}
	return out
}

// checkNarrow compares a narrowing function with the reference for one input.
func checkNarrow(t *testing.T, f halfFormat, name string, x float32, got uint16) {
	t.Helper()
	if x != x {
		if !f.isNaN16(got) || (got&0x8000 != 0) != math.Signbit(float64(x)) {
			t.Fatalf("%s(NaN %#08x) = %#04x, want a NaN of the same sign", name, math.Float32bits(x), got)
		}
		return
	}
	if want := f.refNarrow(float64(x)); got != want {
		t.Fatalf("%s(%g = %#08x) = %#04x, want %#04x", name, x, math.Float32bits(x), got, want)
	}
}

func TestToFloat16MatchesReference(t *testing.T) {
	xs := narrowCases(fmtF16, 1<<16)
	bulk := make([]Float16, len(xs))
	F32ToF16(bulk, xs)
	for i, x := range xs {
		checkNarrow(t, fmtF16, "ToFloat16", x, uint16(ToFloat16(x)))
		checkNarrow(t, fmtF16, "F32ToF16", x, uint16(bulk[i]))
	}
}

func TestToBFloat16MatchesReference(t *testing.T) {
	xs := narrowCases(fmtBF16, 1<<16)
	bulk := make([]BFloat16, len(xs))
	F32ToBF16(bulk, xs)
	back := make([]float32, len(xs))
	BF16ToF32(back, bulk)
	for i, x := range xs {
		checkNarrow(t, fmtBF16, "ToBFloat16", x, uint16(ToBFloat16(x)))
		checkNarrow(t, fmtBF16, "F32ToBF16", x, uint16(bulk[i]))
		if !sameF32(back[i], bulk[i].Float32()) {
			t.Fatalf("BF16ToF32 disagrees with Float32 for %#04x", bulk[i])
		}
	}
}

func TestHalfSpecialValues(t *testing.T) {
	cases := []struct {
		in       float32
		f16, b16 uint16
	}{
		{0, 0x0000, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},                            // largest finite f16
		{65519.99, 0x7bff, 0x4780},                         // just below the overflow midpoint
		{65520, 0x7c00, 0x4780},                            // the midpoint: ties to even is Inf
		{1e6, 0x7c00, 0x4974},                              // f16 overflow
		{0x1p-24, 0x0001, 0x3380},                          // smallest f16 subnormal
		{0x1p-25, 0x0000, 0x3300},                          // half of it: ties to even is 0
		{0x1.8p-25, 0x0001, 0x3340},                        // above the half: rounds up
		{0x1p-14, 0x0400, 0x3880},                          // smallest f16 normal
		{math.MaxFloat32, 0x7c00, 0x7f80},                  // bf16 overflow rounds to Inf
		{float32(math.Inf(-1)), 0xfc00, 0xff80},            // -Inf
		{math.Float32frombits(0x7f800001), 0x7e00, 0x7fc0}, // signalling NaN is quieted
	}
	for _, c := range cases {
		if got := uint16(ToFloat16(c.in)); got != c.f16 {
			t.Errorf("ToFloat16(%g) = %#04x, want %#04x", c.in, got, c.f16)
		}
		if got := uint16(ToBFloat16(c.in)); got != c.b16 {
			t.Errorf("ToBFloat16(%g) = %#04x, want %#04x", c.in, got, c.b16)
		}
	}
}

func TestBulkConvertersStopAtShorter(t *testing.T) {
	dst := []Float16{7, 7, 7}
	F32ToF16(dst, []float32{1, 2})
	if dst[0] != 0x3c00 || dst[1] != 0x4000 || dst[2] != 7 {
		t.Fatalf("F32ToF16 wrote %#04x", dst)
	}
	out := []float32{9}
	F16ToF32(out, []Float16{0x3c00, 0x4000})
	if out[0] != 1 {
		t.Fatalf("F16ToF32 wrote %v", out)
	}
}

// TestNarrowExhaustive checks every float32 bit pattern; run it with
// go test -run NarrowExhaustive -kernels.exhaustive ./kernels/
func TestNarrowExhaustive(t *testing.T) {
	if !*exhaustive {
		t.Skip("needs -kernels.exhaustive")
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			for b := uint64(w); b < 1<<32; b += uint64(workers) {
				x := math.Float32frombits(uint32(b))
				if x != x {
					continue // NaNs are covered by the other tests
				}
				if got, want := uint16(ToFloat16(x)), fmtF16.refNarrow(float64(x)); got != want {
					errs <- "f16 mismatch"
					return
				}
				if got, want := uint16(ToBFloat16(x)), fmtBF16.refNarrow(float64(x)); got != want {
					errs <- "bf16 mismatch"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func FuzzHalfNarrow(f *testing.F) {
	for _, b := range []uint32{0, 0x3f800000, 0x477ff000, 0x33000000, 0x7f800001, 0x80000001} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		x := math.Float32frombits(b)
		checkNarrow(t, fmtF16, "ToFloat16", x, uint16(ToFloat16(x)))
		checkNarrow(t, fmtBF16, "ToBFloat16", x, uint16(ToBFloat16(x)))
		h := Float16(b)
		if back := ToFloat16(h.Float32()); back != h && !fmtF16.isNaN16(uint16(h)) {
			t.Fatalf("%#04x round-tripped to %#04x", h, back)
		}
	})
}
