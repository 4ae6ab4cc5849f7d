package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Throughput is reported per byte of one buffer (b.SetBytes(len(dst))), the
// convention of gorovod's collective benchmarks; memory traffic is about 3×
// that (read dst, read src, write dst).

var benchSizes = []struct {
	name  string
	bytes int
}{{"4KiB", 4 << 10}, {"256KiB", 256 << 10}, {"64MiB", 64 << 20}}

// benchBuffer returns n bytes of dt elements drawn from a normal
// distribution of modest magnitude, like gradients.
func benchBuffer(dt DType, n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	buf := make([]byte, n)
	switch dt {
	case F32:
		for i := range FromBytes[float32](buf) {
			FromBytes[float32](buf)[i] = float32(r.NormFloat64())
		}
	case F64:
		for i := range FromBytes[float64](buf) {
			FromBytes[float64](buf)[i] = r.NormFloat64()
		}
	case F16:
		for i := range FromBytes[Float16](buf) {
			FromBytes[Float16](buf)[i] = ToFloat16(float32(r.NormFloat64()))
		}
	case BF16:
		for i := range FromBytes[BFloat16](buf) {
			FromBytes[BFloat16](buf)[i] = ToBFloat16(float32(r.NormFloat64()))
		}
	default:
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
	}
	return buf
}

func BenchmarkReduce(b *testing.B) {
	cases := []struct {
		dt DType
		op Op
	}{{F32, Sum}, {F64, Sum}, {F32, Max}, {F16, Sum}, {BF16, Sum}, {I32, Sum}}
	for _, c := range cases {
		for _, s := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s/%s", c.dt, c.op, s.name), func(b *testing.B) {
				dst, src := benchBuffer(c.dt, s.bytes, 1), benchBuffer(c.dt, s.bytes, 2)
				// Sums alternate src and -src so that dst does not drift
				// towards overflow, which would time the rare paths.
				neg := slices.Clone(src)
				if err := Scale(c.dt, neg, -1); err != nil {
					b.Fatal(err)
				}
				f, err := Lookup(c.dt, c.op)
				if err != nil {
					b.Fatal(err)
				}
				f(dst, src) // warm up: page faults, lazily built tables
				b.SetBytes(int64(s.bytes))
				for i := 0; b.Loop(); i++ {
					if i%2 == 1 {
						f(dst, neg)
					} else {
						f(dst, src)
					}
				}
			})
		}
	}
}

// BenchmarkSumImpl justifies sumF32 and sumF64: gonum's assembly AXPY
// against the plain Go loop it replaces.
func BenchmarkSumImpl(b *testing.B) {
	impls := []struct {
		name string
		dt   DType
		f    ReduceFunc
	}{
		{"f32/axpy", F32, sumF32}, {"f32/loop", F32, typed(sumLoop[float32])},
		{"f64/axpy", F64, sumF64}, {"f64/loop", F64, typed(sumLoop[float64])},
	}
	for _, im := range impls {
		for _, s := range benchSizes {
			b.Run(im.name+"/"+s.name, func(b *testing.B) {
				dst, src := benchBuffer(im.dt, s.bytes, 1), benchBuffer(im.dt, s.bytes, 2)
				im.f(dst, src)
				b.SetBytes(int64(s.bytes))
				for b.Loop() {
					im.f(dst, src)
				}
			})
		}
	}
}

func BenchmarkScale(b *testing.B) {
	for _, dt := range []DType{F32, F16, I32} {
		for _, s := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", dt, s.name), func(b *testing.B) {
				buf := benchBuffer(dt, s.bytes, 1)
				_ = Scale(dt, buf, 1.5) // warm up
				b.SetBytes(int64(s.bytes))
				for i := 0; b.Loop(); i++ {
					f := 0.5 // alternate so values neither vanish nor overflow
					if i%2 == 1 {
						f = 2
					}
					if err := Scale(dt, buf, f); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConvert measures the bulk converters; bytes are those of the
// float32 side, so figures compare directly with the reducers.
func BenchmarkConvert(b *testing.B) {
	for _, s := range benchSizes[1:] {
		n := s.bytes / 4
		f32 := FromBytes[float32](benchBuffer(F32, s.bytes, 1))
		f16 := make([]Float16, n)
		bf16 := make([]BFloat16, n)
		F32ToF16(f16, f32)
		F32ToBF16(bf16, f32)
		out := make([]float32, n)
		run := func(name string, f func()) {
			b.Run(name+"/"+s.name, func(b *testing.B) {
				f()
				b.SetBytes(int64(s.bytes))
				for b.Loop() {
					f()
				}
			})
		}
		run("F32ToF16", func() { F32ToF16(f16, f32) })
		run("F16ToF32", func() { F16ToF32(out, f16) })
		run("F16ToF32_arith", func() { f16ToF32Arith(out, f16) })
		run("F32ToBF16", func() { F32ToBF16(bf16, f32) })
		run("BF16ToF32", func() { BF16ToF32(out, bf16) })
	}
}

// f16ToF32Arith is F16ToF32 without the table, for comparison.
func f16ToF32Arith(dst []float32, src []Float16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(f16ToF32Bits(uint16(h)))
	}
}
