package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// testLengths are element counts: empty, single, odd tails around the
// 4- and 16-wide assembly loops and the 512-element half blocks, and a large
// buffer with and without a tail.
var testLengths = []int{0, 1, 7, 15, 33, 511, 513, 4096, 4099}

// sameElems reports the first element where got and want differ, treating
// any two NaNs of a float type as equal; -1 if none.
func sameElems(dt DType, got, want []byte) int {
	sz := dt.Size()
	for i := 0; i < len(want); i += sz {
		g, w := got[i:i+sz], want[i:i+sz]
		if bytes.Equal(g, w) {
			continue
		}
		if dt.IsFloat() && math.IsNaN(decodeFloat(dt, g)) && math.IsNaN(decodeFloat(dt, w)) {
			continue
		}
		return i / sz
	}
	return -1
}

func TestReduceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	maxN := slices.Max(testLengths) + 1 // +1: the buffers also start one element in
	for _, dt := range DTypes {
		a, b := randomElems(r, dt, maxN), randomElems(r, dt, maxN)
		for _, op := range Ops {
			want := refReduce(dt, op, a, b)
			t.Run(fmt.Sprintf("%s/%s", dt, op), func(t *testing.T) {
				for _, n := range testLengths {
					for _, off := range []int{0, 1} { // off=1 misaligns for the SIMD path
						checkReduce(t, dt, op, a, b, want, off, n)
					}
				}
			})
		}
	}
}

// checkReduce reduces elements [off, off+n) of copies of a and b and compares
// them with the same range of want.
func checkReduce(t *testing.T, dt DType, op Op, a, b, want []byte, off, n int) {
	t.Helper()
	sz := dt.Size()
	lo, hi := off*sz, (off+n)*sz
	dst, src := slices.Clone(a[:hi]), slices.Clone(b[:hi])
	if err := Reduce(dt, op, dst[lo:], src[lo:]); err != nil {
		t.Fatalf("n=%d off=%d: %v", n, off, err)
	}
	if i := sameElems(dt, dst[lo:], want[lo:hi]); i >= 0 {
		e := lo + i*sz
		t.Fatalf("n=%d off=%d: element %d: %s(%x, %x) = %x, want %x",
			n, off, i, op, a[e:e+sz], b[e:e+sz], dst[e:e+sz], want[e:e+sz])
	}
	if !bytes.Equal(src[lo:], b[lo:hi]) || !bytes.Equal(dst[:lo], a[:lo]) {
		t.Fatalf("n=%d off=%d: wrote outside dst[%d:%d]", n, off, lo, hi)
	}
}

func TestReduceAliased(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range DTypes {
		for _, op := range Ops {
			x := randomElems(r, dt, 100)
			want := refReduce(dt, op, x, x)
			if err := Reduce(dt, op, x, x); err != nil {
				t.Fatal(err)
			}
			if i := sameElems(dt, x, want); i >= 0 {
				t.Errorf("%s %s(x, x): element %d differs", dt, op, i)
			}
		}
	}
}

func TestReduceKnownValues(t *testing.T) {
	nan := float32(math.NaN())
	dst := []float32{1, nan, 3, -0.0, 5}
	src := []float32{nan, 2, -4, 0, 5}
	if err := Reduce(F32, Max, AsBytes(dst), AsBytes(src)); err != nil {
		t.Fatal(err)
	}
	if dst[0] == dst[0] || dst[1] == dst[1] || dst[2] != 3 || math.Signbit(float64(dst[3])) || dst[4] != 5 {
		t.Fatalf("max = %v, want [NaN NaN 3 +0 5]", dst)
	}
	u := []uint8{200, 3}
	if err := Reduce(U8, Sum, AsBytes(u), AsBytes([]uint8{100, 4})); err != nil || u[0] != 44 || u[1] != 7 {
		t.Fatalf("u8 sum = %v (%v), want [44 7] (wraps)", u, err)
	}
	i := []int32{math.MaxInt32}
	if err := Reduce(I32, Sum, AsBytes(i), AsBytes([]int32{1})); err != nil || i[0] != math.MinInt32 {
		t.Fatalf("i32 sum = %v (%v), want MinInt32 (wraps)", i, err)
	}
	h := []Float16{ToFloat16(2048)}
	if err := Reduce(F16, Sum, AsBytes(h), AsBytes([]Float16{ToFloat16(1)})); err != nil || h[0].Float32() != 2048 {
		t.Fatalf("f16 2048+1 = %v (%v), want 2048 (ties to even)", h[0].Float32(), err)
	}
}

func TestReduceErrors(t *testing.T) {
	four, eight := make([]byte, 4), make([]byte, 8)
	cases := []struct {
		name     string
		dt       DType
		op       Op
		dst, src []byte
		want     error
	}{
		{"zero dtype", 0, Sum, four, four, ErrDType},
		{"unknown dtype", U8 + 1, Sum, four, four, ErrDType},
		{"zero op", F32, 0, four, four, ErrOp},
		{"unknown op", F32, Adasum + 1, four, four, ErrOp},
		{"adasum is not element-wise", F32, Adasum, four, four, ErrOp},
		{"lengths differ", F32, Sum, four, eight, ErrLength},
		{"partial element", F64, Sum, four, four, ErrLength},
		{"partial f16", F16, Min, make([]byte, 3), make([]byte, 3), ErrLength},
		{"partial src", I32, Max, make([]byte, 6), make([]byte, 6), ErrLength},
		{"misaligned dst", F32, Sum, eight[1:5], four, ErrAlign},
		{"misaligned src", I64, Prod, make([]byte, 8), make([]byte, 64)[1:9], ErrAlign},
	}
	for _, c := range cases {
		err := Reduce(c.dt, c.op, c.dst, c.src)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Reduce error = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Lookup(0, Sum); !errors.Is(err, ErrDType) {
		t.Errorf("Lookup(0, Sum) error = %v", err)
	}
	if _, err := Lookup(F32, 0); !errors.Is(err, ErrOp) {
		t.Errorf("Lookup(F32, 0) error = %v", err)
	}
	if !Adasum.Valid() || Adasum.ElementWise() || !Sum.ElementWise() || Op(0).ElementWise() {
		t.Errorf("Adasum: Valid %v, ElementWise %v; Sum ElementWise %v", Adasum.Valid(), Adasum.ElementWise(), Sum.ElementWise())
	}
	if op, err := ParseOp(" AdaSum "); op != Adasum || err != nil || Adasum.String() != "adasum" {
		t.Errorf("ParseOp(adasum) = %v, %v; String %q", op, err, Adasum.String())
	}
	for _, dt := range DTypes {
		for _, op := range Ops {
			if f, err := Lookup(dt, op); f == nil || err != nil {
				t.Errorf("Lookup(%s, %s) = %v, %v", dt, op, f, err)
			}
		}
	}
}
