package kernels

import (
	"fmt"
	"strings"
	"unsafe"
)

// DType identifies the element type of a buffer.
type DType uint8

// The element types gorovod reduces. The zero value is invalid so that a
// forgotten field is caught by validation instead of silently meaning float32.
const (
	F32  DType = iota + 1 // IEEE 754 binary32
	F64                   // IEEE 754 binary64
	F16                   // IEEE 754 binary16, widened to float32 for arithmetic
	BF16                  // bfloat16 (upper half of a float32), widened to float32
	I32                   // two's-complement int32, wrapping on overflow
	I64                   // two's-complement int64, wrapping on overflow
	U8                    // uint8, wrapping on overflow
)

var dtypeNames = [...]string{F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I32: "int32", I64: "int64", U8: "uint8"}
var dtypeShort = [...]string{F32: "f32", F64: "f64", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", U8: "u8"}
var dtypeSizes = [...]int{F32: 4, F64: 8, F16: 2, BF16: 2, I32: 4, I64: 8, U8: 1}

// DTypes lists every valid DType, for table tests and flag help.
var DTypes = []DType{F32, F64, F16, BF16, I32, I64, U8}

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d >= F32 && d <= U8 }

// Size is the size of one element in bytes (0 for an invalid DType).
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

// String returns the long name ("float32", "bfloat16", ...).
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeNames[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F64 || d == F16 || d == BF16 }

// ParseDType accepts a long name ("float32") or a short one ("f32"), case-insensitively.
func ParseDType(s string) (DType, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, d := range DTypes {
		if s == dtypeNames[d] || s == dtypeShort[d] {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want one of float32, float64, float16, bfloat16, int32, int64, uint8)", ErrDType, s)
}

// Float16 is an IEEE 754 binary16 value stored as its bit pattern.
type Float16 uint16

// BFloat16 is a bfloat16 value stored as its bit pattern (the upper 16 bits of a float32).
type BFloat16 uint16

// Element is the set of Go types that map one-to-one onto a DType.
type Element interface {
	float32 | float64 | Float16 | BFloat16 | int32 | int64 | uint8
}

// DTypeOf returns the DType of the element type T.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return F32
	case float64:
		return F64
	case Float16:
		return F16
	case BFloat16:
		return BF16
	case int32:
		return I32
	case int64:
		return I64
	default: // uint8 is the only type left in Element
		return U8
	}
}

// AsBytes views a typed slice as its raw bytes without copying.
func AsBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// FromBytes views raw bytes as a typed slice without copying. len(b) must be
// a multiple of the element size and b must be suitably aligned (buffers from
// make or AsBytes are).
func FromBytes[T Element](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
}
