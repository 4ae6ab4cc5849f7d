package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// The binary form of a Request (all integers varints, signed where a
// value may be out of range so that the negotiation can name it):
//
//	kind u8 | dtype u8 | op u8 | flags u8 | uvarint len, name |
//	uvarint ndims, varint dims... |
//	[flagRoot]   varint root |
//	[flagScale]  float64 prescale, float64 postscale (little endian) |
//	[flagGroup]  uvarint group, varint group size |
//	[flagSplits] uvarint n, varint splits...
const (
	flagRoot = 1 << iota
	flagScale
	flagGroup
	flagSplits
	flagsKnown = flagRoot | flagScale | flagGroup | flagSplits
)

// Bounds that keep a hostile or corrupt encoding from asking for huge
// allocations; real requests are far inside them.
const (
	maxNameLen = 1 << 16
	maxDims    = 64
)

// AppendBinary appends the binary form of r to b.
func (r *Request) AppendBinary(b []byte) ([]byte, error) {
	var flags byte
	if r.Root != 0 {
		flags |= flagRoot
	}
	if math.Float64bits(r.Prescale)|math.Float64bits(r.Postscale) != 0 {
		flags |= flagScale
	}
	if r.Group != 0 || r.GroupSize != 0 {
		flags |= flagGroup
	}
	if r.Splits != nil {
		flags |= flagSplits
	}
	if len(r.Name) > maxNameLen || len(r.Shape) > maxDims {
		return b, fmt.Errorf("%w: request %.40q: name of %d bytes or %d dimensions too large", collective.ErrInvalid, r.Name, len(r.Name), len(r.Shape))
	}
	b = append(b, byte(r.Kind), byte(r.DType), byte(r.ReduceOp), flags)
	b = binary.AppendUvarint(b, uint64(len(r.Name)))
	b = append(b, r.Name...)
	b = appendInts(b, r.Shape)
	if flags&flagRoot != 0 {
		b = binary.AppendVarint(b, int64(r.Root))
	}
	if flags&flagScale != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Prescale))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Postscale))
	}
	if flags&flagGroup != 0 {
		b = binary.AppendUvarint(b, r.Group)
		b = binary.AppendVarint(b, int64(r.GroupSize))
	}
	if flags&flagSplits != 0 {
		b = appendInts(b, r.Splits)
	}
	return b, nil
}

// MarshalBinary returns the binary form of r.
func (r *Request) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes a Request from exactly data; malformed or
// trailing bytes give an error wrapping ErrProtocol.
func (r *Request) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	d.request(r)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func appendInts(b []byte, xs []int) []byte {
	b = binary.AppendUvarint(b, uint64(len(xs)))
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

// wireRequest is a Request as one rank sends it in a negotiation cycle,
// with how long it has been waiting there (ages compare across ranks;
// clocks do not).
type wireRequest struct {
	Request
	Age time.Duration
}

// appendRequests appends a list of requests: uvarint count, then per
// request uvarint age in microseconds and the request.
func appendRequests(b []byte, reqs []wireRequest) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	var err error
	for i := range reqs {
		b = binary.AppendUvarint(b, uint64(max(reqs[i].Age, 0)/time.Microsecond))
		if b, err = reqs[i].AppendBinary(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decodeRequests decodes a list written by appendRequests.
func decodeRequests(data []byte) ([]wireRequest, error) {
	d := decoder{b: data}
	n := d.count(5) // a request takes at least 5 bytes
	out := make([]wireRequest, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var w wireRequest
		w.Age = time.Duration(min(d.uvarint(), math.MaxInt64/uint64(time.Microsecond))) * time.Microsecond
		d.request(&w.Request)
		out = append(out, w)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return out, nil
}

// decoder consumes b; the first problem sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: request encoding: "+format, append([]any{collective.ErrProtocol}, args...)...)
	}
	d.b = nil
}

func (d *decoder) request(r *Request) {
	head := d.bytes(4)
	if head == nil {
		return
	}
	r.Kind, r.DType, r.ReduceOp = Kind(head[0]), kernels.DType(head[1]), kernels.Op(head[2])
	flags := head[3]
	if flags&^flagsKnown != 0 {
		d.fail("unknown flags %#x", flags)
		return
	}
	r.Name = string(d.bytes(d.count(1)))
	r.Shape = d.ints(maxDims)
	if flags&flagRoot != 0 {
		r.Root = d.int()
	}
	if flags&flagScale != 0 {
		r.Prescale, r.Postscale = d.float(), d.float()
	}
	if flags&flagGroup != 0 {
		r.Group, r.GroupSize = d.uvarint(), d.int()
	}
	if flags&flagSplits != 0 {
		r.Splits = d.ints(len(d.b))
	}
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || v != int64(int(v)) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

// count reads a length whose items take at least unit bytes each, so that
// it cannot exceed what the remaining input could hold.
func (d *decoder) count(unit int) int {
	v := d.uvarint()
	if v > uint64(len(d.b)/unit) || v > maxNameLen*16 {
		d.fail("count %d exceeds the %d bytes left", v, len(d.b))
		return 0
	}
	return int(v)
}

// ints reads a list of at most limit varints; nil stays distinct from empty.
func (d *decoder) ints(limit int) []int {
	n := d.count(1)
	if n > limit {
		d.fail("%d entries, at most %d", n, limit)
	}
	if d.err != nil {
		return nil
	}
	xs := make([]int, n)
	for i := range xs {
		xs[i] = d.int()
	}
	return xs
}

func (d *decoder) float() float64 {
	p := d.bytes(8)
	if p == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(p))
}
