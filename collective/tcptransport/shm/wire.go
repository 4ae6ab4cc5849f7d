package shm

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// Stream is one lane of an authenticated link: its socket, or the TLS
// session over it. The handshake writes to the outbound lane and reads
// from the inbound one under its deadline, and lifts that deadline when
// done.
type Stream interface {
	io.Reader
	io.Writer
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// The handshake's messages (see Handshake), each sent on the link's
// outbound lane and read from its inbound one, before any frame:
//
//	offer   length of path (2 bytes, little-endian), path, token
//	        (shmring.TokenSize bytes); a zero length offers nothing, and
//	        no path or token follows
//	answer  1 byte: 1 the offered ring is mapped, 0 refused

// writeOffer sends an offer of the ring at path (see shmring.OfferPath)
// with its token; an empty path offers nothing.
func writeOffer(s Stream, deadline time.Time, path string, token []byte) error {
	b := binary.LittleEndian.AppendUint16(nil, uint16(len(path)))
	if path != "" {
		b = append(append(b, path...), token...)
	}
	s.SetWriteDeadline(deadline)
	_, err := s.Write(b)
	return err
}

// readOffer reads what writeOffer sends.
func readOffer(s Stream, deadline time.Time) (string, []byte, error) {
	s.SetReadDeadline(deadline)
	var n [2]byte
	if _, err := io.ReadFull(s, n[:]); err != nil {
		return "", nil, err
	}
	size := int(binary.LittleEndian.Uint16(n[:]))
	if size == 0 {
		return "", nil, nil
	}
	b := make([]byte, size+shmring.TokenSize)
	if _, err := io.ReadFull(s, b); err != nil {
		return "", nil, err
	}
	return string(b[:size]), b[size:], nil
}

// writeByte sends one byte before deadline.
func writeByte(s Stream, deadline time.Time, v byte) error {
	s.SetWriteDeadline(deadline)
	_, err := s.Write([]byte{v})
	return err
}

// readByte reads one byte before deadline.
func readByte(s Stream, deadline time.Time) (byte, error) {
	s.SetReadDeadline(deadline)
	var b [1]byte
	_, err := io.ReadFull(s, b[:])
	return b[0], err
}
