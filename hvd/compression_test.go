package hvd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

func TestCompressionRoundTrip(t *testing.T) {
	cases := []struct {
		c      hvd.Compression
		relTol float64 // worst relative error of one round trip
	}{
		{hvd.NoCompression, 0},
		{hvd.FP32Compression, 6e-8},
		{hvd.FP16Compression, 4.9e-4},
		{hvd.BF16Compression, 3.9e-3},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// lengths around the conversion chunk; magnitudes 2^-13..2^11, inside
	// fp16's normal range
	for _, n := range []int{0, 1, 7, 4095, 4096, 4097, 10000} {
		src := make([]float64, n)
		for i := range src {
			src[i] = (0.5 + rng.Float64()/2) * math.Pow(2, float64(rng.IntN(24)-12)) * float64(1-2*rng.IntN(2))
		}
		for _, c := range cases {
			wire := make([]byte, n*c.c.WireDType().Size())
			c.c.Compress(wire, src)
			back := make([]float64, n)
			c.c.Decompress(back, wire)
			for i := range src {
				if d := math.Abs(back[i] - src[i]); d > c.relTol*math.Abs(src[i]) {
					t.Fatalf("%v, n=%d: %v came back as %v", c.c, n, src[i], back[i])
				}
			}
		}
	}
}

func TestCompressionNames(t *testing.T) {
	want := map[string]kernels.DType{"none": kernels.F64, "fp32": kernels.F32, "FP16": kernels.F16, "bf16": kernels.BF16}
	for s, dt := range want {
		c, err := hvd.ParseCompression(s)
		if err != nil || c.WireDType() != dt {
			t.Errorf("ParseCompression(%q) = %v, %v", s, c, err)
		}
		if back, _ := hvd.ParseCompression(c.String()); back != c {
			t.Errorf("%v does not parse back", c)
		}
	}
	if _, err := hvd.ParseCompression("zip"); err == nil {
		t.Error("zip accepted")
	}
	if s := hvd.Compression(9).String(); s != "compression(9)" {
		t.Errorf("String of an unknown compression: %q", s)
	}
}
