package tcptransport

import "net"

// tlsRecord is the most plaintext one TLS record carries (RFC 8446 5.1).
const tlsRecord = 16 << 10

// secureLanes are the TLS sessions of a link on TCP with Config.TLS: every
// frame is written to out and read from in through them. A session
// encrypts each write into records of up to tlsRecord bytes, one socket
// write each, so a frame's header and the start of its payload are first
// gathered into one record (stage) rather than sent as a record of their
// own; the rest of a large payload goes to the session without a copy.
// Reads go through the session's own buffer; they never busy-poll.
type secureLanes struct {
	out, in net.Conn
	stage   []byte // capacity tlsRecord; touched only by the send in progress
}

func newSecureLanes(out, in net.Conn) *secureLanes {
	return &secureLanes{out: out, in: in, stage: make([]byte, 0, tlsRecord)}
}

// write sends parts end to end: whatever fits the stage with the parts
// before it in one record, a part that overflows it straight from its
// buffer.
func (s *secureLanes) write(parts [][]byte) error {
	buf := s.stage[:0]
	for _, p := range parts {
		n := min(len(p), cap(buf)-len(buf))
		buf = append(buf, p[:n]...)
		if p = p[n:]; len(p) == 0 {
			continue
		}
		if _, err := s.out.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		// Send the whole records of the rest from p; keep its tail, which
		// would make a short record, for the stage.
		whole := len(p) - len(p)%tlsRecord
		if whole > 0 {
			if _, err := s.out.Write(p[:whole]); err != nil {
				return err
			}
		}
		buf = append(buf, p[whole:]...)
	}
	if len(buf) > 0 {
		if _, err := s.out.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
