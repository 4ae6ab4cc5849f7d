package hvd

import (
	"fmt"
	"strings"

	"github.com/gorovod/gorovod/kernels"
)

// Compression is how gradients travel on the wire: the float64 gradient
// is cast to the wire type before the all-reduce and back after it, as
// Horovod's Compression.fp16 does. The reduction itself runs in the wire
// type.
type Compression uint8

// The compressions. NoCompression sends float64 and is exact; FP32 halves
// the traffic; FP16 and BF16 quarter it (FP16 keeps more mantissa, BF16
// float32's range, so it cannot overflow).
const (
	NoCompression Compression = iota
	FP32Compression
	FP16Compression
	BF16Compression
)

var compressionNames = [...]string{NoCompression: "none", FP32Compression: "fp32", FP16Compression: "fp16", BF16Compression: "bf16"}

// String returns "none", "fp32", "fp16" or "bf16".
func (c Compression) String() string {
	if int(c) >= len(compressionNames) {
		return fmt.Sprintf("compression(%d)", uint8(c))
	}
	return compressionNames[c]
}

// ParseCompression reads "none", "fp32", "fp16" or "bf16" (any case).
func ParseCompression(s string) (Compression, error) {
	for c, n := range compressionNames {
		if strings.EqualFold(s, n) {
			return Compression(c), nil
		}
	}
	return 0, fmt.Errorf("hvd: unknown compression %q (want none, fp32, fp16 or bf16)", s)
}

// WireDType is the element type gradients are all-reduced in.
func (c Compression) WireDType() kernels.DType {
	switch c {
	case FP32Compression:
		return kernels.F32
	case FP16Compression:
		return kernels.F16
	case BF16Compression:
		return kernels.BF16
	default:
		return kernels.F64
	}
}

// compressChunk bounds the float32 scratch space of a conversion.
const compressChunk = 4096

// Compress writes src into dst, a buffer of len(src) wire elements.
func (c Compression) Compress(dst []byte, src []float64) {
	switch c {
	case FP32Compression:
		out := kernels.FromBytes[float32](dst)
		for i, v := range src {
			out[i] = float32(v)
		}
	case FP16Compression:
		viaF32(src, func(off int, f []float32) { kernels.F32ToF16(kernels.FromBytes[kernels.Float16](dst)[off:], f) })
	case BF16Compression:
		viaF32(src, func(off int, f []float32) { kernels.F32ToBF16(kernels.FromBytes[kernels.BFloat16](dst)[off:], f) })
	default:
		copy(kernels.FromBytes[float64](dst), src)
	}
}

// Decompress writes the wire elements of src into dst.
func (c Compression) Decompress(dst []float64, src []byte) { c.decompress(dst, src, 1) }

// decompress writes the wire elements of src, multiplied by f, into dst.
func (c Compression) decompress(dst []float64, src []byte, f float64) {
	switch c {
	case FP32Compression:
		in := kernels.FromBytes[float32](src)[:len(dst)]
		for i, v := range in {
			dst[i] = float64(v) * f
		}
		return
	case NoCompression:
		in := kernels.FromBytes[float64](src)[:len(dst)]
		if f == 1 {
			copy(dst, in)
			return
		}
		for i, v := range in {
			dst[i] = v * f
		}
		return
	}
	var scratch [compressChunk]float32
	for off := 0; off < len(dst); off += compressChunk {
		n := min(compressChunk, len(dst)-off)
		w := scratch[:n]
		if c == FP16Compression {
			kernels.F16ToF32(w, kernels.FromBytes[kernels.Float16](src)[off:])
		} else {
			kernels.BF16ToF32(w, kernels.FromBytes[kernels.BFloat16](src)[off:])
		}
		for i, v := range w {
			dst[off+i] = float64(v) * f
		}
	}
}

// viaF32 narrows src to float32 a chunk at a time and hands each chunk,
// with its offset, to put.
func viaF32(src []float64, put func(off int, f []float32)) {
	var scratch [compressChunk]float32
	for off := 0; off < len(src); off += compressChunk {
		f := scratch[:min(compressChunk, len(src)-off)]
		for i := range f {
			f[i] = float32(src[off+i])
		}
		put(off, f)
	}
}
