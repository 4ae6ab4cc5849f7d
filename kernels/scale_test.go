package kernels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// refScaleFloat is x·factor for a float type: the exact product with the
// factor in the type's working precision, rounded once (via float32 for the
// half types, as Scale defines).
func refScaleFloat(dt DType, x, factor float64) float64 {
	if dt != F64 {
		factor = float64(float32(factor))
	}
	if math.IsNaN(x) || math.IsNaN(factor) || math.IsInf(x, 0) || math.IsInf(factor, 0) || x == 0 || factor == 0 {
		v := x * factor // exact or NaN
		if dt != F64 {
			v = float64(float32(v)) // an infinite factor in float32
		}
		return v
	}
	z := new(big.Float).SetPrec(256).Mul(big.NewFloat(x), big.NewFloat(factor))
	return roundFloat(dt, z)
}

// refScaleInt is round-half-even(float64(x)·factor) clamped to dt, computed
// with floor and big integers instead of math.RoundToEven and conversions.
func refScaleInt(dt DType, x int64, factor float64) *big.Int {
	if factor == 1 { // documented no-op: exact even beyond 2^53
		return big.NewInt(x)
	}
	p := float64(x) * factor
	f := math.Floor(p)
	if d := p - f; d > 0.5 || d == 0.5 && math.Mod(f, 2) != 0 {
		f++
	}
	v, _ := big.NewFloat(f).Int(nil)
	lo, hi := big.NewInt(0), big.NewInt(math.MaxUint8)
	if dt != U8 {
		bits := uint(8*dt.Size() - 1)
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), bits), big.NewInt(1))
		lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), bits))
	}
	if v.Cmp(hi) > 0 {
		return hi
	}
	if v.Cmp(lo) < 0 {
		return lo
	}
	return v
}

// refScale returns the expected Scale(dt, buf, factor).
func refScale(dt DType, buf []byte, factor float64) []byte {
	sz := dt.Size()
	out := make([]byte, len(buf))
	for i := 0; i < len(buf); i += sz {
		e := buf[i : i+sz]
		if dt.IsFloat() {
			encodeFloat(dt, out[i:i+sz], refScaleFloat(dt, decodeFloat(dt, e), factor))
			continue
		}
		v := refScaleInt(dt, decodeInt(dt, e).Int64(), factor)
		var le [8]byte
		binary.LittleEndian.PutUint64(le[:], uint64(v.Int64()))
		copy(out[i:i+sz], le[:sz])
	}
	return out
}

func TestScaleMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	factors := []float64{0, 1, -1, 0.5, 1.0 / 3, -1.7, 2.5, 1e-3, 3e9, 1 + 1e-12, 1e-300, math.Copysign(0, -1)}
	for _, dt := range DTypes {
		data := randomElems(r, dt, slices.Max(testLengths))
		for _, f := range factors {
			want := refScale(dt, data, f)
			t.Run(fmt.Sprintf("%s/%g", dt, f), func(t *testing.T) {
				for _, n := range testLengths {
					buf := slices.Clone(data[:n*dt.Size()])
					if err := Scale(dt, buf, f); err != nil {
						t.Fatalf("n=%d: %v", n, err)
					}
					if i := sameElems(dt, buf, want[:len(buf)]); i >= 0 {
						sz := dt.Size()
						t.Fatalf("n=%d: element %d: %x × %g = %x, want %x", n, i,
							data[i*sz:(i+1)*sz], f, buf[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
					}
				}
			})
		}
	}
}

func TestScaleIntRoundingAndClamping(t *testing.T) {
	i32 := []int32{5, 7, -5, -7, 3, math.MaxInt32, math.MinInt32, 1}
	if err := Scale(I32, AsBytes(i32), 0.5); err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 4, -2, -4, 2, 1 << 30, -1 << 30, 0}; !slices.Equal(i32, want) {
		t.Errorf("i32 × 0.5 = %v, want %v", i32, want)
	}
	i32 = []int32{math.MaxInt32, math.MinInt32, -3}
	if err := Scale(I32, AsBytes(i32), 2); err != nil || !slices.Equal(i32, []int32{math.MaxInt32, math.MinInt32, -6}) {
		t.Errorf("i32 × 2 = %v (%v), want saturation", i32, err)
	}
	i64 := []int64{math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	if err := Scale(I64, AsBytes(i64), -1); err != nil || !slices.Equal(i64, []int64{math.MinInt64, math.MaxInt64, math.MaxInt64}) {
		t.Errorf("i64 × -1 = %v (%v)", i64, err)
	}
	u8 := []uint8{200, 10, 3, 0}
	if err := Scale(U8, AsBytes(u8), 1.5); err != nil || !slices.Equal(u8, []uint8{255, 15, 4, 0}) {
		t.Errorf("u8 × 1.5 = %v (%v), want [255 15 4 0]", u8, err)
	}
	u8 = []uint8{200, 1}
	if err := Scale(U8, AsBytes(u8), -1); err != nil || !slices.Equal(u8, []uint8{0, 0}) {
		t.Errorf("u8 × -1 = %v (%v), want clamped to 0", u8, err)
	}
}

func TestScaleFloatExamples(t *testing.T) {
	f := []float32{1, 3, float32(math.Inf(1))}
	if err := Scale(F32, AsBytes(f), 0.25); err != nil || !slices.Equal(f, []float32{0.25, 0.75, float32(math.Inf(1))}) {
		t.Errorf("f32 × 0.25 = %v (%v)", f, err)
	}
	h := []Float16{ToFloat16(65504), ToFloat16(3)}
	if err := Scale(F16, AsBytes(h), 2); err != nil || h[0] != 0x7c00 || h[1].Float32() != 6 {
		t.Errorf("f16 × 2 = %v, %v (%v), want +Inf, 6", h[0].Float32(), h[1].Float32(), err)
	}
	g := []float64{1, -2}
	if err := Scale(F64, AsBytes(g), math.NaN()); err != nil || !math.IsNaN(g[0]) || !math.IsNaN(g[1]) {
		t.Errorf("f64 × NaN = %v (%v), want NaNs", g, err)
	}
}

func TestScaleErrors(t *testing.T) {
	if err := Scale(0, make([]byte, 4), 2); !errors.Is(err, ErrDType) {
		t.Errorf("bad dtype: %v", err)
	}
	if err := Scale(I64, make([]byte, 12), 2); !errors.Is(err, ErrLength) {
		t.Errorf("partial element: %v", err)
	}
	if err := Scale(F16, make([]byte, 64)[1:5], 2); !errors.Is(err, ErrAlign) {
		t.Errorf("misaligned: %v", err)
	}
	if err := Scale(U8, make([]byte, 64)[1:5], 2); err != nil {
		t.Errorf("u8 has no alignment: %v", err)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		buf := []int32{1, 2}
		if err := Scale(I32, AsBytes(buf), f); !errors.Is(err, ErrFactor) || !slices.Equal(buf, []int32{1, 2}) {
			t.Errorf("i32 × %g: err %v, buf %v; want ErrFactor and no change", f, err, buf)
		}
	}
}
