package frame

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gorovod/gorovod/collective"
)

// Frame header layout, 24 bytes, integers little-endian:
//
//	offset size field
//	0      2    magic "GV"
//	2      1    version (1)
//	3      1    flags: zero, or FlagRemote
//	4      4    Step
//	8      8    Seq
//	16     8    Len: payload bytes that follow the header
//
// The magic, version and flags catch a desynchronised or foreign
// stream at the first header instead of after a huge bogus read.
const (
	// HeaderSize is the bytes of a frame header.
	HeaderSize   = 24
	frameMagic   = "GV"
	frameVersion = 1
)

// Header is the decoded form of a frame header.
type Header struct {
	Seq  uint64 // the message's collective.Tag.Seq
	Step uint32 // the message's collective.Tag.Step
	Len  uint64 // payload bytes that follow the header
	// Remote marks a frame whose payload stays in the sender's memory
	// for the receiver to copy from there: only its address follows the
	// header. Only a shared-memory link sends such frames (see package
	// shm); Check rejects them.
	Remote bool
}

// FlagRemote is the flags byte of a Remote frame.
const FlagRemote = 1

// Put encodes h into b.
func Put(b *[HeaderSize]byte, h Header) {
	b[0], b[1], b[2], b[3] = frameMagic[0], frameMagic[1], frameVersion, 0
	if h.Remote {
		b[3] = FlagRemote
	}
	binary.LittleEndian.PutUint32(b[4:8], h.Step)
	binary.LittleEndian.PutUint64(b[8:16], h.Seq)
	binary.LittleEndian.PutUint64(b[16:24], h.Len)
}

// Decode parses one frame header. It rejects input of the wrong size,
// a foreign magic or version, unknown flags and a length that
// does not fit in an int (no Go slice could receive it).
func Decode(b []byte) (Header, error) {
	if len(b) != HeaderSize {
		return Header{}, fmt.Errorf("frame header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[0:2]) != frameMagic {
		return Header{}, fmt.Errorf("bad frame magic %#x", b[0:2])
	}
	if b[2] != frameVersion {
		return Header{}, fmt.Errorf("frame version %d, want %d", b[2], frameVersion)
	}
	if b[3]&^FlagRemote != 0 {
		return Header{}, fmt.Errorf("frame flags are %#x, want 0 or %#x", b[3], FlagRemote)
	}
	h := Header{
		Step:   binary.LittleEndian.Uint32(b[4:8]),
		Seq:    binary.LittleEndian.Uint64(b[8:16]),
		Len:    binary.LittleEndian.Uint64(b[16:24]),
		Remote: b[3] == FlagRemote,
	}
	if h.Len > math.MaxInt {
		return Header{}, fmt.Errorf("frame length %d exceeds %d", h.Len, math.MaxInt)
	}
	return h, nil
}

// Check decodes the frame header hdr and checks it against the tag and
// payload length n that a receive expects; its error says what is wrong.
// A Remote frame is wrong here.
func Check(hdr []byte, tag collective.Tag, n int) error {
	remote, err := CheckAny(hdr, tag, n)
	if err == nil && remote {
		return fmt.Errorf("remote frame (flags %#x) on a link that carries none", FlagRemote)
	}
	return err
}

// CheckAny is Check that also accepts a Remote frame, and reports whether
// it is one.
func CheckAny(hdr []byte, tag collective.Tag, n int) (remote bool, err error) {
	h, err := Decode(hdr)
	if err != nil {
		return false, err
	}
	if h.Seq != tag.Seq || h.Step != tag.Step || h.Len != uint64(n) {
		return false, fmt.Errorf("expected seq %d step %d len %d, got seq %d step %d len %d",
			tag.Seq, tag.Step, n, h.Seq, h.Step, h.Len)
	}
	return h.Remote, nil
}

// PartsLen is the payload bytes of a frame of parts end to end.
func PartsLen(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}
