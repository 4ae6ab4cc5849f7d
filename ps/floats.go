package ps

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Wire is how a client's Pulls and Pushes carry values: as float64, the
// servers' own type (exact), or as float32, half the bytes. Whatever the
// wire, the servers keep and update float64 values; with WireFloat32 a
// worker sees them rounded to float32 and its gradients are rounded to
// float32 before they are applied (the same trade as hvd's fp16
// compression of all-reduced gradients, at float32's 24-bit precision).
// Create and Load always carry float64.
type Wire int

const (
	// WireFloat64 carries values as little-endian float64 (the default).
	WireFloat64 Wire = iota
	// WireFloat32 carries values as little-endian float32.
	WireFloat32
)

// String is "float64" or "float32".
func (w Wire) String() string {
	switch w {
	case WireFloat64:
		return "float64"
	case WireFloat32:
		return "float32"
	}
	return fmt.Sprintf("Wire(%d)", int(w))
}

// size is the bytes of one value on this wire.
func (w Wire) size() int {
	if w == WireFloat32 {
		return 4
	}
	return 8
}

func (w Wire) valid() bool { return w == WireFloat64 || w == WireFloat32 }

// hostLittle says that this machine stores a float64 as its little-endian
// bytes, so float64 values go to and from the wire with one memory copy
// instead of a conversion per value.
var hostLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// float64Bytes is v's memory as bytes (host order).
func float64Bytes(v []float64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// appendValues appends v to b as w's little-endian values.
func appendValues(b []byte, v []float64, w Wire) []byte {
	if w == WireFloat32 {
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
		}
		return b
	}
	if hostLittle {
		return append(b, float64Bytes(v)...)
	}
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// readValues fills dst from w's little-endian values; len(b) must be
// w.size()*len(dst).
func readValues(dst []float64, b []byte, w Wire) {
	if w == WireFloat32 {
		for i := range dst {
			dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return
	}
	if hostLittle {
		copy(float64Bytes(dst), b[:8*len(dst)])
		return
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
}

// appendFloats appends v as little-endian float64 bytes.
func appendFloats(b []byte, v []float64) []byte { return appendValues(b, v, WireFloat64) }

// readFloats fills dst from little-endian float64 bytes; len(b) must be
// 8*len(dst).
func readFloats(dst []float64, b []byte) { readValues(dst, b, WireFloat64) }
