package shm

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// Peer is a link to a peer on this rank's host that takes part in the
// handshake: both of its lanes have formed and authenticated.
type Peer struct {
	Rank int    // the peer's rank, as Setup.Capacity and the log name it
	Out  Stream // the lane this rank writes: rank>peer
	In   Stream // the lane this rank reads: peer>rank
}

// Setup is what the handshake needs besides its links.
type Setup struct {
	// Proc stands in for "/proc" when opening offers (see shmring.Open);
	// tests point it elsewhere to make every offer fail.
	Proc string
	// Deadline bounds every read and write of the handshake.
	Deadline time.Time
	// Capacity gives the capacity of the ring this rank offers a peer
	// (by rank), 0 for none: the shared-memory budget is spent (see
	// Budget), and the link stays on TCP, logged at Debug only, since that
	// is by design.
	Capacity func(peer int) int
	// Logger receives the line that says which links stay on TCP, and why;
	// nil discards it.
	Logger *slog.Logger
}

// Handshake runs the shared-memory handshake on peers' links, over their
// freshly formed lanes, before any frame, in three steps over all the
// links at once: each side creates a ring for its outbound direction and
// offers it (its memory file's /proc path and token; see shmring.Create),
// opens the peer's offer and answers whether it mapped it, then hears the
// peer's answer to its own offer. A link uses its rings only if both
// directions were accepted; otherwise it stays on TCP. The result is
// indexed as peers, nil for a link that stays on TCP. If any stays on TCP
// for another cause than the budget, one Warn line says which and why.
// The lanes' deadlines are lifted when Handshake returns.
//
// broken, also indexed as peers, holds the error of each link whose
// handshake could not finish: a read or write of it failed (the peer went
// away, or Deadline passed first). Such a link's streams are at an unknown
// place in the handshake (this side may not have written its answer, or
// read the peer's), so it must carry no frame: the caller fails it, and
// the peer then finds it closed rather than misreading handshake bytes as
// a frame or a frame's first byte as the answer.
func Handshake(s Setup, peers []Peer) (rings []*Rings, broken []error) {
	h := &handshake{links: peers, proc: s.Proc, deadline: s.Deadline, capacity: s.Capacity,
		peers: make([]*peer, len(peers))}
	for i := range h.peers {
		h.peers[i] = &peer{}
	}
	h.each(h.offer)
	h.each(h.answer)
	h.each(h.hear)
	rings = h.conclude()
	if s.Logger != nil {
		h.report(s.Logger)
	}
	for _, l := range peers {
		l.Out.SetDeadline(time.Time{})
		l.In.SetDeadline(time.Time{})
	}
	broken = make([]error, len(peers))
	for i, p := range h.peers {
		broken[i] = p.err
	}
	return rings, broken
}

// handshake is one rank's shared-memory handshake with its peers on the
// same host.
type handshake struct {
	links    []Peer
	proc     string
	deadline time.Time
	capacity func(peer int) int // of the ring offered to peer; 0: none
	peers    []*peer            // the state of each link, as links
}

// peer is the handshake's state for one link.
type peer struct {
	mine   *shmring.Ring // the ring offered for this rank's outbound direction
	file   *os.File      // its memory file, open until the peer has answered
	theirs *shmring.Ring // the peer's ring, mapped
	err    error         // a read or write of the handshake that failed, with its step; nil while none has
	why    string        // why the link stays on TCP; "" while it may not
	budget bool          // it stays on TCP because a side's budget was spent
}

// stay records why the link stays on TCP, keeping the first cause.
func (p *peer) stay(format string, args ...any) {
	if p.why == "" {
		p.why = fmt.Sprintf(format, args...)
	}
}

// fail records a failed read or write of the handshake.
func (p *peer) fail(step string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("shared-memory handshake: %s: %w", step, err)
	}
	p.stay("%s: %v", step, err)
}

// each runs step on every link, in the order of the links.
func (h *handshake) each(step func(l Peer, p *peer)) {
	for i, p := range h.peers {
		step(h.links[i], p)
	}
}

// offer creates a ring for the link l and offers it (an empty offer
// where none could be made).
func (h *handshake) offer(l Peer, p *peer) {
	path, token := "", []byte(nil)
	if c := h.capacity(l.Rank); c == 0 {
		p.budget = true
		p.stay("this rank's shared-memory budget (%d MiB of rings) is spent", BudgetBytes>>20)
	} else if r, f, tok, err := shmring.Create(c); err != nil {
		p.stay("create ring: %v", err)
	} else {
		p.mine, p.file, path, token = r, f, shmring.OfferPath(f), tok
	}
	if err := writeOffer(l.Out, h.deadline, path, token); err != nil {
		p.fail("send ring offer", err)
	}
}

// answer reads the peer's offer on l, opens and checks the ring it names, and
// answers 1 (mapped) or 0 (refused).
func (h *handshake) answer(l Peer, p *peer) {
	if p.err != nil {
		return
	}
	path, token, err := readOffer(l.In, h.deadline)
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
	if err := writeByte(l.Out, h.deadline, verdict); err != nil {
		p.fail("answer peer's ring offer", err)
	}
}

// hear reads the peer's answer on l to this rank's offer, then closes the offered
// file: the peer has mapped its ring or never will.
func (h *handshake) hear(l Peer, p *peer) {
	if p.err == nil {
		if v, err := readByte(l.In, h.deadline); err != nil {
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
// accepted, indexed as the links, and unmaps the rings of every other link.
func (h *handshake) conclude() []*Rings {
	rings := make([]*Rings, len(h.peers))
	for i, p := range h.peers {
		if p.why == "" {
			rings[i] = &Rings{out: p.mine, in: p.theirs}
			continue
		}
		if p.mine != nil {
			p.mine.Unmap()
		}
		if p.theirs != nil {
			p.theirs.Unmap()
		}
	}
	return rings
}

// report logs, in one Warn line for the whole rank, the same-host links
// that stay on TCP and why, peers with the same cause together.
func (h *handshake) report(log *slog.Logger) {
	var peers []int
	var causes []string
	byCause := map[string][]int{}
	var spent []int
	h.each(func(l Peer, p *peer) {
		peer := l.Rank
		if p.why == "" {
			return
		}
		if p.budget && p.err == nil {
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
