package tcptransport

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
)

// offerShm runs the shared-memory handshake on every link to a peer whose
// address has this rank's host part, over the freshly formed sockets,
// before any frame: each side offers a ring for its outbound direction
// (its memory file's /proc path and token; see createRing), opens the
// peer's offer, and answers; a direction is used only if both were
// accepted, else the link stays on TCP. Links to other hosts exchange
// nothing. The result is indexed by peer. If any same-host link stays on
// TCP, one Warn line says which and why.
func offerShm(cfg Config, socks []lanes) []*shmLink {
	h := newShmHandshake(cfg, socks)
	h.offer()
	h.answer()
	links := h.conclude()
	h.report(cfg.Logger)
	clearDeadlines(socks)
	return links
}

// shmHandshake is one rank's shared-memory handshake with its peers on the
// same host, run in three steps over every such link at once: offer,
// answer, conclude.
type shmHandshake struct {
	socks    []lanes
	deadline time.Time
	peers    []*shmPeer // by rank; nil for a link that does not take part
}

// shmPeer is the handshake's state for one link.
type shmPeer struct {
	mine   *ring    // the ring offered for this rank's outbound direction
	file   *os.File // its memory file, open until the peer has answered
	theirs *ring    // the peer's ring, mapped
	broken bool     // a read or write of the handshake failed
	why    string   // why the link stays on TCP; "" while it may not
}

// stay records why the link stays on TCP, keeping the first cause.
func (p *shmPeer) stay(format string, args ...any) {
	if p.why == "" {
		p.why = fmt.Sprintf(format, args...)
	}
}

// fail records a failed read or write of the handshake.
func (p *shmPeer) fail(step string, err error) {
	p.broken = true
	p.stay("%s: %v", step, err)
}

// newShmHandshake selects the links that take part: both lanes formed, and
// the peer's address has this rank's host part.
func newShmHandshake(cfg Config, socks []lanes) *shmHandshake {
	h := &shmHandshake{socks: socks, deadline: time.Now().Add(cfg.HandshakeTimeout), peers: make([]*shmPeer, len(socks))}
	self := hostOf(cfg.Addrs[cfg.Rank])
	for peer := range socks {
		if socks[peer].complete() && hostOf(cfg.Addrs[peer]) == self {
			h.peers[peer] = &shmPeer{}
		}
	}
	return h
}

// offer creates a ring for every link and offers it (an empty offer where
// none could be made).
func (h *shmHandshake) offer() {
	for peer, p := range h.peers {
		if p == nil {
			continue
		}
		path, token := "", []byte(nil)
		r, f, tok, err := createRing()
		if err != nil {
			p.stay("create ring: %v", err)
		} else {
			p.mine, p.file, path, token = r, f, offerPath(f), tok
		}
		if err := writeOffer(h.socks[peer][laneOut], h.deadline, path, token); err != nil {
			p.fail("send ring offer", err)
		}
	}
}

// answer reads every peer's offer, opens and checks the ring, and answers
// 1 (mapped) or 0 (refused).
func (h *shmHandshake) answer() {
	for peer, p := range h.peers {
		if p == nil || p.broken {
			continue
		}
		path, token, err := readOffer(h.socks[peer][laneIn], h.deadline)
		if err != nil {
			p.fail("read peer's ring offer", err)
			continue
		}
		verdict := byte(0)
		if path == "" {
			p.stay("peer offered no ring (its log says why)")
		} else if r, err := openRing(path, token); err != nil {
			p.stay("open peer's ring: %v", err)
		} else {
			p.theirs, verdict = r, 1
		}
		if err := writeByte(h.socks[peer][laneOut], h.deadline, verdict); err != nil {
			p.fail("answer peer's ring offer", err)
		}
	}
}

// conclude hears every peer's answer to this rank's offer, closes the
// offered files (the peer has mapped its ring or never will) and returns
// the links whose two directions were both accepted, indexed by peer. The
// rings of every other link are unmapped.
func (h *shmHandshake) conclude() []*shmLink {
	links := make([]*shmLink, len(h.peers))
	for peer, p := range h.peers {
		if p == nil {
			continue
		}
		if !p.broken {
			if v, err := readByte(h.socks[peer][laneIn], h.deadline); err != nil {
				p.fail("read peer's answer", err)
			} else if v != 1 {
				p.stay("peer could not map this rank's ring (its log says why)")
			}
		}
		if p.file != nil {
			p.file.Close()
		}
		if p.why == "" {
			links[peer] = newShmLink(p.mine, p.theirs)
			continue
		}
		if p.mine != nil {
			p.mine.unmap()
		}
		if p.theirs != nil {
			p.theirs.unmap()
		}
	}
	return links
}

// report logs, in one Warn line for the whole rank, the same-host links
// that stay on TCP and why, peers with the same cause together.
func (h *shmHandshake) report(log *slog.Logger) {
	var peers []int
	var causes []string
	byCause := map[string][]int{}
	for peer, p := range h.peers {
		if p == nil || p.why == "" {
			continue
		}
		peers = append(peers, peer)
		if byCause[p.why] == nil {
			causes = append(causes, p.why)
		}
		byCause[p.why] = append(byCause[p.why], peer)
	}
	if len(peers) == 0 {
		return
	}
	reasons := make([]string, len(causes))
	for i, c := range causes {
		reasons[i] = fmt.Sprintf("peers %v: %s", byCause[c], c)
	}
	log.Warn("tcptransport: shared memory unavailable, links to peers on this host stay on TCP",
		"peers", peers, "reason", strings.Join(reasons, "; "))
}

// clearDeadlines lifts the handshake's deadlines from every socket.
func clearDeadlines(socks []lanes) {
	for _, l := range socks {
		for _, s := range l {
			if s != nil {
				s.SetDeadline(time.Time{})
			}
		}
	}
}

// writeOffer sends a ring offer: the length of path (2 bytes, little
// endian), path, and the token. An empty path offers nothing, and no token
// follows.
func writeOffer(s *net.TCPConn, deadline time.Time, path string, token []byte) error {
	b := binary.LittleEndian.AppendUint16(nil, uint16(len(path)))
	if path != "" {
		b = append(append(b, path...), token...)
	}
	s.SetWriteDeadline(deadline)
	_, err := s.Write(b)
	return err
}

// readOffer reads what writeOffer sends.
func readOffer(s *net.TCPConn, deadline time.Time) (string, []byte, error) {
	s.SetReadDeadline(deadline)
	var n [2]byte
	if _, err := io.ReadFull(s, n[:]); err != nil {
		return "", nil, err
	}
	size := int(binary.LittleEndian.Uint16(n[:]))
	if size == 0 {
		return "", nil, nil
	}
	b := make([]byte, size+tokenSize)
	if _, err := io.ReadFull(s, b); err != nil {
		return "", nil, err
	}
	return string(b[:size]), b[size:], nil
}

// writeByte sends one byte before deadline.
func writeByte(s *net.TCPConn, deadline time.Time, v byte) error {
	s.SetWriteDeadline(deadline)
	_, err := s.Write([]byte{v})
	return err
}

// readByte reads one byte before deadline.
func readByte(s *net.TCPConn, deadline time.Time) (byte, error) {
	s.SetReadDeadline(deadline)
	var b [1]byte
	_, err := io.ReadFull(s, b[:])
	return b[0], err
}
