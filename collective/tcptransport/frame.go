package tcptransport

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Frame header layout, 24 bytes, integers little-endian:
//
//	offset size field
//	0      2    magic "GV"
//	2      1    version (1)
//	3      1    reserved, zero
//	4      4    Step
//	8      8    Seq
//	16     8    Len: payload bytes that follow the header
//
// The magic, version and reserved byte catch a desynchronised or foreign
// stream at the first header instead of after a huge bogus read.
const (
	headerSize   = 24
	frameMagic   = "GV"
	frameVersion = 1
)

// header is the decoded form of a frame header.
type header struct {
	Seq  uint64
	Step uint32
	Len  uint64
}

// putHeader encodes h into b.
func putHeader(b *[headerSize]byte, h header) {
	b[0], b[1], b[2], b[3] = frameMagic[0], frameMagic[1], frameVersion, 0
	binary.LittleEndian.PutUint32(b[4:8], h.Step)
	binary.LittleEndian.PutUint64(b[8:16], h.Seq)
	binary.LittleEndian.PutUint64(b[16:24], h.Len)
}

// decodeHeader parses one frame header. It rejects input of the wrong size,
// a foreign magic or version, a non-zero reserved byte and a length that
// does not fit in an int (no Go slice could receive it).
func decodeHeader(b []byte) (header, error) {
	if len(b) != headerSize {
		return header{}, fmt.Errorf("frame header is %d bytes, want %d", len(b), headerSize)
	}
	if string(b[0:2]) != frameMagic {
		return header{}, fmt.Errorf("bad frame magic %#x", b[0:2])
	}
	if b[2] != frameVersion {
		return header{}, fmt.Errorf("frame version %d, want %d", b[2], frameVersion)
	}
	if b[3] != 0 {
		return header{}, fmt.Errorf("reserved frame byte is %#x, want 0", b[3])
	}
	h := header{
		Step: binary.LittleEndian.Uint32(b[4:8]),
		Seq:  binary.LittleEndian.Uint64(b[8:16]),
		Len:  binary.LittleEndian.Uint64(b[16:24]),
	}
	if h.Len > math.MaxInt {
		return header{}, fmt.Errorf("frame length %d exceeds %d", h.Len, math.MaxInt)
	}
	return h, nil
}
