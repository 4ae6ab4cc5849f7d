package kernels

import (
	"math"
	"sync"
)

// The bulk converters below work like copy: they convert
// min(len(dst), len(src)) elements and leave the rest of dst untouched.
// They round exactly like ToFloat16, ToBFloat16 and the Float32 methods.

// F32ToF16 narrows src into dst with round-to-nearest-even.
func F32ToF16(dst []Float16, src []float32) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		b := math.Float32bits(f)
		// f32ToF16Bits is too big to inline; its fast path is not, and a
		// call per element would cost a third of the throughput.
		h, ok := f32ToF16Normal(b)
		if !ok {
			h = f32ToF16Bits(b)
		}
		dst[i] = Float16(h)
	}
}

// F16ToF32 widens src into dst (exact).
func F16ToF32(dst []float32, src []Float16) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	t := f16Table()
	for i, h := range src {
		dst[i] = math.Float32frombits(t[h])
	}
}

// F32ToBF16 narrows src into dst with round-to-nearest-even.
func F32ToBF16(dst []BFloat16, src []float32) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		dst[i] = BFloat16(f32ToBF16Bits(math.Float32bits(f)))
	}
}

// BF16ToF32 widens src into dst (exact).
func BF16ToF32(dst []float32, src []BFloat16) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, b := range src {
		dst[i] = math.Float32frombits(uint32(b) << 16)
	}
}

// f16TableOnce guards the lazily built decode table: 64 Ki float32 bit
// patterns (256 KiB), built on first use so programs that never touch
// float16 do not pay for it. It is written once and only read afterwards.
var (
	f16TableOnce sync.Once
	f16TableData *[1 << 16]uint32
)

// f16Table returns the binary16 → binary32 decode table.
func f16Table() *[1 << 16]uint32 {
	f16TableOnce.Do(func() {
		t := new([1 << 16]uint32)
		for h := range t {
			t[h] = f16ToF32Bits(uint16(h))
		}
		f16TableData = t
	})
	return f16TableData
}
