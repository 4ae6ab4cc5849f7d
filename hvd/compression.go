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

// WireDType is the element type float64 gradients are all-reduced in.
func (c Compression) WireDType() kernels.DType { return c.WireDTypeFor(kernels.F64) }

// WireDTypeFor is the element type gradients of type dt (kernels.F64 or
// kernels.F32) are all-reduced in: NoCompression sends them as they are,
// the others in their own type.
func (c Compression) WireDTypeFor(dt kernels.DType) kernels.DType {
	switch c {
	case FP32Compression:
		return kernels.F32
	case FP16Compression:
		return kernels.F16
	case BF16Compression:
		return kernels.BF16
	default:
		return dt
	}
}

// compressChunk bounds the float32 scratch space of a conversion.
const compressChunk = 4096

// Compress writes the float64 values of src into dst, a buffer of len(src)
// elements of WireDType.
func (c Compression) Compress(dst []byte, src []float64) { encode(dst, c.WireDType(), src, 1) }

// Decompress writes the WireDType elements of src into dst.
func (c Compression) Decompress(dst []float64, src []byte) { decode(dst, src, c.WireDType(), 1) }

// float is a parameter's element type.
type float interface{ float32 | float64 }

// encode writes src, multiplied by f, into dst as elements of the wire
// type wt: float64 (src must be float64), float32, float16 or bfloat16.
func encode[T float](dst []byte, wt kernels.DType, src []T, f float64) {
	switch wt {
	case kernels.DTypeOf[T]():
		scaleInto(kernels.FromBytes[T](dst)[:len(src)], src, f)
	case kernels.F32:
		scaleInto(kernels.FromBytes[float32](dst)[:len(src)], src, f)
	case kernels.F16:
		viaF32(src, f, func(off int, f []float32) { kernels.F32ToF16(kernels.FromBytes[kernels.Float16](dst)[off:], f) })
	case kernels.BF16:
		viaF32(src, f, func(off int, f []float32) { kernels.F32ToBF16(kernels.FromBytes[kernels.BFloat16](dst)[off:], f) })
	default:
		panic("hvd: no encoding of " + kernels.DTypeOf[T]().String() + " as " + wt.String())
	}
}

// decode writes the wire elements of src (of type wt), multiplied by f,
// into dst.
func decode[T float](dst []T, src []byte, wt kernels.DType, f float64) {
	switch wt {
	case kernels.F64:
		scaleInto(dst, kernels.FromBytes[float64](src)[:len(dst)], f)
		return
	case kernels.F32:
		scaleInto(dst, kernels.FromBytes[float32](src)[:len(dst)], f)
		return
	}
	var scratch [compressChunk]float32
	for off := 0; off < len(dst); off += compressChunk {
		n := min(compressChunk, len(dst)-off)
		w := scratch[:n]
		if wt == kernels.F16 {
			kernels.F16ToF32(w, kernels.FromBytes[kernels.Float16](src)[off:])
		} else {
			kernels.BF16ToF32(w, kernels.FromBytes[kernels.BFloat16](src)[off:])
		}
		scaleInto(dst[off:off+n], w, f)
	}
}

// scaleInto writes in×f into dst. When both are float32 the product is
// taken in float32 (f rounded to float32), else in float64.
func scaleInto[T, S float](dst []T, in []S, f float64) {
	if f == 1 {
		if d, ok := any(dst).([]S); ok {
			copy(d, in)
			return
		}
		for i, v := range in {
			dst[i] = T(v)
		}
		return
	}
	if d, ok := any(dst).([]float32); ok {
		if s, ok := any(in).([]float32); ok {
			f32, d := float32(f), d[:len(s)]
			for i, v := range s {
				d[i] = v * f32
			}
			return
		}
	}
	for i, v := range in {
		dst[i] = T(float64(v) * f)
	}
}

// viaF32 narrows src×f to float32 a chunk at a time and hands each chunk,
// with its offset, to put (float32 src with f 1 whole, as it is).
func viaF32[T float](src []T, f float64, put func(off int, f []float32)) {
	if s, ok := any(src).([]float32); ok && f == 1 {
		put(0, s)
		return
	}
	var scratch [compressChunk]float32
	for off := 0; off < len(src); off += compressChunk {
		w := scratch[:min(compressChunk, len(src)-off)]
		scaleInto(w, src[off:off+len(w)], f)
		put(off, w)
	}
}
