package tcptransport

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// offerShm runs the shared-memory handshake on every link to a peer whose
// address has this rank's host part, over the freshly formed sockets,
// before any frame, in three steps over all such links at once: each side
// creates a ring for its outbound direction and offers it (its memory
// file's /proc path and token; see shmring.Create), opens the peer's offer
// and answers whether it mapped it, then hears the peer's answer to its
// own offer. A link uses its rings only if both directions were accepted;
// otherwise it stays on TCP. Links to other hosts exchange nothing. proc
// stands in for "/proc" when opening offers (see shmring.Open); capacity
// gives the capacity of the ring this rank offers a peer, 0 for none (the
// shared-memory budget is spent: the link stays on TCP, logged at Debug
// only, since that is by design). The result
// is indexed by peer, nil for a link on TCP. If any same-host link stays on
// TCP, one Warn line says which and why.
func offerShm(cfg Config, proc string, socks []lanes, capacity func(peer int) int) []*shmRings {
	h := newShmHandshake(cfg, proc, socks)
	h.capacity = capacity
	h.each(h.offer)
	h.each(h.answer)
	h.each(h.hear)
	rings := h.conclude()
	h.report(cfg.Logger)
	clearDeadlines(socks)
	return rings
}

// shmHandshake is one rank's shared-memory handshake with its peers on the
// same host.
type shmHandshake struct {
	socks    []lanes
	proc     string
	deadline time.Time
	capacity func(peer int) int // of the ring offered to peer; 0: none
	peers    []*shmPeer         // by rank; nil for a link that does not take part
}

// shmPeer is the handshake's state for one link.
type shmPeer struct {
	mine   *shmring.Ring // the ring offered for this rank's outbound direction
	file   *os.File      // its memory file, open until the peer has answered
	theirs *shmring.Ring // the peer's ring, mapped
	broken bool          // a read or write of the handshake failed
	why    string        // why the link stays on TCP; "" while it may not
	budget bool          // it stays on TCP because a side's budget was spent
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
func newShmHandshake(cfg Config, proc string, socks []lanes) *shmHandshake {
	h := &shmHandshake{socks: socks, proc: proc, deadline: time.Now().Add(cfg.HandshakeTimeout),
		peers: make([]*shmPeer, len(socks))}
	self := hostOf(cfg.Addrs[cfg.Rank])
	for peer := range socks {
		if socks[peer].complete() && hostOf(cfg.Addrs[peer]) == self {
			h.peers[peer] = &shmPeer{}
		}
	}
	return h
}

// each runs step on every link that takes part, in rank order.
func (h *shmHandshake) each(step func(peer int, p *shmPeer)) {
	for peer, p := range h.peers {
		if p != nil {
			step(peer, p)
		}
	}
}

// offer creates a ring for the link to peer and offers it (an empty offer
// where none could be made).
func (h *shmHandshake) offer(peer int, p *shmPeer) {
	path, token := "", []byte(nil)
	if c := h.capacity(peer); c == 0 {
		p.budget = true
		p.stay("this rank's shared-memory budget (%d MiB of rings) is spent", shmBudgetBytes>>20)
	} else if r, f, tok, err := shmring.Create(c); err != nil {
		p.stay("create ring: %v", err)
	} else {
		p.mine, p.file, path, token = r, f, shmring.OfferPath(f), tok
	}
	if err := writeOffer(h.socks[peer][laneOut], h.deadline, path, token); err != nil {
		p.fail("send ring offer", err)
	}
}

// answer reads peer's offer, opens and checks the ring it names, and
// answers 1 (mapped) or 0 (refused).
func (h *shmHandshake) answer(peer int, p *shmPeer) {
	if p.broken {
		return
	}
	path, token, err := readOffer(h.socks[peer][laneIn], h.deadline)
	if err != nil {
		p.fail("read peer's ring offer", err)
		return
	}
	verdict := byte(0)
	if path == "" {
		p.budget = true
		p.stay("peer offered no ring (its shared-memory budget is spent, or its log says why)")
	} else if r, err := shmring.Open(h.proc, path, token); err != nil {
		p.stay("open peer's ring: %v", err)
	} else {
		p.theirs, verdict = r, 1
	}
	if err := writeByte(h.socks[peer][laneOut], h.deadline, verdict); err != nil {
		p.fail("answer peer's ring offer", err)
	}
}

// hear reads peer's answer to this rank's offer, then closes the offered
// file: the peer has mapped its ring or never will.
func (h *shmHandshake) hear(peer int, p *shmPeer) {
	if !p.broken {
		if v, err := readByte(h.socks[peer][laneIn], h.deadline); err != nil {
			p.fail("read peer's answer", err)
		} else if v != 1 {
			p.stay("peer could not map this rank's ring (its log says why)")
		}
	}
	if p.file != nil {
		p.file.Close()
		p.file = nil
	}
}

// conclude returns the rings of the links whose two directions were both
// accepted, indexed by peer, and unmaps the rings of every other link.
func (h *shmHandshake) conclude() []*shmRings {
	rings := make([]*shmRings, len(h.peers))
	h.each(func(peer int, p *shmPeer) {
		if p.why == "" {
			rings[peer] = &shmRings{out: p.mine, in: p.theirs}
			return
		}
		if p.mine != nil {
			p.mine.Unmap()
		}
		if p.theirs != nil {
			p.theirs.Unmap()
		}
	})
	return rings
}

// report logs, in one Warn line for the whole rank, the same-host links
// that stay on TCP and why, peers with the same cause together.
func (h *shmHandshake) report(log *slog.Logger) {
	var peers []int
	var causes []string
	byCause := map[string][]int{}
	var spent []int
	h.each(func(peer int, p *shmPeer) {
		if p.why == "" {
			return
		}
		if p.budget && !p.broken {
			spent = append(spent, peer)
			return
		}
		peers = append(peers, peer)
		if byCause[p.why] == nil {
			causes = append(causes, p.why)
		}
		byCause[p.why] = append(byCause[p.why], peer)
	})
	if len(spent) > 0 {
		log.Debug("tcptransport: shared-memory budget spent, links to peers on this host stay on TCP", "peers", spent)
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
