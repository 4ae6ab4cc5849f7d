//go:build cuda

package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gorovod/gorovod/kernels"
)

// These tests need a GPU: importing gorgonia.org/cu ends the process on a
// machine without one, before TestMain runs, so they cannot skip themselves.
// Build them with -tags cuda and run them where a GPU is.

// gpu is the Context every test shares (device 0), opened by TestMain.
var gpu *Context

func TestMain(m *testing.M) {
	var err error
	if gpu, err = Open(0); err != nil {
		fmt.Fprintln(os.Stderr, "open device 0:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "device 0: %s\n", gpu.Name())
	code := m.Run()
	if err := gpu.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		code = 1
	}
	os.Exit(code)
}

// newStream returns a stream of gpu that is closed when t ends.
func newStream(t testing.TB) *Stream {
	t.Helper()
	s, err := gpu.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// alloc returns a device buffer of gpu that is freed when t ends.
func alloc(t testing.TB, bytes int) *Buffer {
	t.Helper()
	b, err := gpu.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gpu.Free(b); err != nil {
			t.Error(err)
		}
	})
	return b
}

// sentinel is the byte that fills device memory around the range a test
// works on, so that a write outside the range shows.
const sentinel = 0xa5

// guard is the number of sentinel bytes after a range.
const guard = 64

// devImage is a device buffer holding data at byte offset off, surrounded
// by sentinel bytes.
type devImage struct {
	buf  *Buffer
	off  int
	size int // bytes of data
}

// upload copies data to a fresh device buffer at byte offset off.
func upload(t *testing.T, s *Stream, data []byte, off int) devImage {
	t.Helper()
	img := bytes.Repeat([]byte{sentinel}, off+len(data)+guard)
	copy(img[off:], data)
	b := alloc(t, len(img))
	if err := s.CopyHtoD(b.Ptr, img); err != nil {
		t.Fatal(err)
	}
	return devImage{buf: b, off: off, size: len(data)}
}

// ptr is the device address of the data.
func (d devImage) ptr() uintptr { return d.buf.Ptr + uintptr(d.off) }

// download waits for s, copies the image back, checks that the sentinel
// bytes are intact and returns the data.
func (d devImage) download(t *testing.T, s *Stream) []byte {
	t.Helper()
	img := make([]byte, d.buf.Bytes)
	if err := s.CopyDtoH(img, d.buf.Ptr); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, b := range img {
		if (i < d.off || i >= d.off+d.size) && b != sentinel {
			t.Fatalf("byte %d outside the data [%d, %d) was overwritten: %#x", i, d.off, d.off+d.size, b)
		}
	}
	return img[d.off : d.off+d.size]
}

// randomElems returns n random elements of dt as bytes: floats of many
// magnitudes with some zeros of both signs, subnormals, infinities and NaNs;
// half types mostly from such floats and partly raw bit patterns (which
// cover every class); integers as random bits (so sums and products wrap).
func randomElems(r *rand.Rand, dt kernels.DType, n int) []byte {
	b := make([]byte, n*dt.Size())
	switch dt {
	case kernels.F32:
		f := kernels.FromBytes[float32](b)
		for i := range f {
			f[i] = math.Float32frombits(randFloatBits32(r))
		}
	case kernels.F64:
		f := kernels.FromBytes[float64](b)
		for i := range f {
			f[i] = r.NormFloat64() * math.Ldexp(1, r.IntN(80)-40)
			switch r.IntN(64) {
			case 0:
				f[i] = math.NaN()
			case 1:
				f[i] = math.Inf(1 - 2*r.IntN(2))
			case 2:
				f[i] = math.Float64frombits(uint64(r.IntN(2)) << 63)
			case 3:
				f[i] = math.Float64frombits(r.Uint64() & 0x800fffffffffffff)
			}
		}
	case kernels.F16:
		h := kernels.FromBytes[kernels.Float16](b)
		for i := range h {
			if r.IntN(4) == 0 {
				h[i] = kernels.Float16(r.Uint32())
			} else {
				h[i] = kernels.ToFloat16(float32(r.NormFloat64() * math.Ldexp(1, r.IntN(24)-14)))
			}
		}
	case kernels.BF16:
		h := kernels.FromBytes[kernels.BFloat16](b)
		for i := range h {
			if r.IntN(4) == 0 {
				h[i] = kernels.BFloat16(r.Uint32())
			} else {
				h[i] = kernels.ToBFloat16(math.Float32frombits(randFloatBits32(r)))
			}
		}
	default:
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

// randFloatBits32 returns a random float32 (as bits) of a wide range of
// magnitudes, now and then a special value.
func randFloatBits32(r *rand.Rand) uint32 {
	switch r.IntN(64) {
	case 0:
		return 0x7fc00000 | r.Uint32()&0x803fffff // NaN
	case 1:
		return 0x7f800000 | uint32(r.IntN(2))<<31 // ±Inf
	case 2:
		return uint32(r.IntN(2)) << 31 // ±0
	case 3:
		return r.Uint32() & 0x807fffff // subnormal
	}
	return math.Float32bits(float32(r.NormFloat64() * math.Ldexp(1, r.IntN(60)-30)))
}

// isNaN reports whether the element e of type dt is a NaN.
func isNaN(dt kernels.DType, e []byte) bool {
	switch dt {
	case kernels.F32:
		return math.IsNaN(float64(kernels.FromBytes[float32](e)[0]))
	case kernels.F64:
		return math.IsNaN(kernels.FromBytes[float64](e)[0])
	case kernels.F16:
		v := kernels.FromBytes[kernels.Float16](e)[0]
		return v&0x7c00 == 0x7c00 && v&0x03ff != 0
	case kernels.BF16:
		v := kernels.FromBytes[kernels.BFloat16](e)[0]
		return v&0x7f80 == 0x7f80 && v&0x007f != 0
	}
	return false
}

// firstDiff returns the index of the first element where got and want
// differ, or -1. With nanEqual, two NaNs count as equal whatever their
// payloads: see the package documentation (x86 keeps an operand's payload in
// arithmetic, NVIDIA GPUs return a canonical NaN).
func firstDiff(dt kernels.DType, got, want []byte, nanEqual bool) int {
	sz := dt.Size()
	for i := 0; i < len(want); i += sz {
		g, w := got[i:i+sz], want[i:i+sz]
		if bytes.Equal(g, w) || (nanEqual && isNaN(dt, g) && isNaN(dt, w)) {
			continue
		}
		return i / sz
	}
	return -1
}

// placement is an element count and the byte offsets of dst and src from a
// 256-byte aligned allocation.
type placement struct{ n, dstOff, srcOff int }

func (p placement) String() string { return fmt.Sprintf("n=%d/off=%d,%d", p.n, p.dstOff, p.srcOff) }

// placements lists the cases for element size sz: the lengths 0, 1, 7,
// 4096 and 1<<20+13 aligned, then unaligned starts, equal modulo 16 (a
// scalar head before the vector body) and different modulo 16 (scalar
// throughout), at lengths with odd tails.
func placements(sz int) []placement {
	var ps []placement
	for _, n := range []int{0, 1, 7, 4096, 1<<20 + 13} {
		ps = append(ps, placement{n, 0, 0})
	}
	offs := [][2]int{{1, 1}, {1, 2}, {3, 0}, {0, 5}, {15, 15}}
	for _, n := range []int{7, 4096 + 5, 1<<16 + 3} {
		for _, o := range offs {
			d, s := o[0]*sz%256, o[1]*sz%256
			ps = append(ps, placement{n, d, s})
		}
	}
	return ps
}
