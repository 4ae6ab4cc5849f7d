package tcptransport

import (
	"io"
	"net"
	"time"
)

// tlsRecord is the most plaintext one TLS record carries (RFC 8446 5.1).
const tlsRecord = 16 << 10

// secureLanes are the TLS sessions of a link on TCP with Config.TLS: every
// frame is written to out and read from in through them. A session
// encrypts each write into records of up to tlsRecord bytes, so a frame's
// header and the start of its payload are first gathered into one record
// (stage) rather than sent as a record of their own, and every write to
// the session but a frame's last is a whole number of full records; the
// rest of a large payload goes to the session without a copy. The records
// of a frame reach the socket in few writes, and reads of small frames
// poll the socket first, as a plain link's do (see laneConn).
type secureLanes struct {
	out, in     net.Conn  // the sessions
	wire, rwire *laneConn // what they run over: out's, in's
	stage       []byte    // capacity tlsRecord; touched only by the send in progress
	spin        bool      // small reads may poll (see inbound)
}

// newSecureLanes carries frames through the TLS sessions of out and in;
// spin > 0 lets the reads of small frames poll the socket that long first.
func newSecureLanes(out, in *sock, spin time.Duration) *secureLanes {
	in.lane.in = newInbound(in.tcp, 0, spin, 0, false)
	return &secureLanes{out: out.tls, in: in.tls, wire: out.lane, rwire: in.lane,
		stage: make([]byte, 0, tlsRecord), spin: spin > 0}
}

// readFull fills p from the inbound session; poll as inbound.readFull.
func (s *secureLanes) readFull(p []byte, poll bool) error {
	s.rwire.poll = poll && s.spin
	_, err := io.ReadFull(s.in, p)
	return err
}

// write sends parts end to end (see secureLanes), the records gathered
// into few socket writes (see laneConn).
func (s *secureLanes) write(parts [][]byte) error {
	s.wire.gather = true
	err := s.records(parts)
	s.wire.gather = false
	if ferr := s.wire.flush(); err == nil {
		err = ferr
	}
	return err
}

// records writes parts to the session: whatever fits the stage with the
// parts before it in one record, a part that overflows it straight from
// its buffer.
func (s *secureLanes) records(parts [][]byte) error {
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
