package engine

import (
	"log/slog"
	"slices"
	"time"
)

// entryState is where a pending request stands in the negotiation.
type entryState uint8

const (
	entryUnsent entryState = iota // to be sent uncached in the next cycle
	entrySent                     // in the message table
	entryHit                      // waiting for its cache slot's bit
)

// staleCycles is the least number of cycles a cache hit waits before it is
// sent uncached instead, so that the message table can name the ranks that
// are missing it; it must also have waited half the stall threshold.
const staleCycles = 4

// entry is one operation submitted on this rank. The negotiator reads the
// request and keeps the negotiation fields; data and h belong to the
// Engine, which the tasks carry the entry back to.
type entry struct {
	req       Request
	data      []byte
	h         *Handle
	submitted time.Time
	seq       uint64 // submission order on this rank
	state     entryState
	slot      int    // cache slot while a hit
	hitCycle  uint64 // the negotiator's cycle count when it became a hit
}

// negotiator is one rank's side of the negotiation, as a state machine in
// the manner of etcd raft's RawNode: it starts no goroutines, does no I/O,
// reads no clock (times are passed in) and takes no locks. The Engine
// feeds it and carries out what it returns. A cycle is, in this order:
//
//	submit, join          the requests and Join taken from the queue
//	begin                 the proposal: the control vector to exchange, the
//	                      early data riding with it, the payload to gather
//	exchanged             after the Min all-reduce of the vectors, the
//	                      agreement: stop, gather (with these sizes) or
//	                      go on, and the early all-reduce it completed
//	gathered              after the all-gather of the payloads, if any
//	decide                the decision: the tasks to perform, planned into
//	                      batches, the autotuning setting to apply after
//	                      them, whether to inspect
//	inspect               after performing them: the stall inspector
//
// Every rank's negotiator reaches the same decisions from the same
// exchanged data. The Engine reads only what these calls return (and
// outstanding, pendingNames and startTuning), never the fields.
type negotiator struct {
	rank, size int
	fusion     int64         // Config.FusionThreshold
	limit      time.Duration // how long an exchange hop waits (answerLimit)
	sentinel   error         // what a rank that misses limit fails with

	pending    map[string]*entry // submitted, not yet decided
	hits       hitTable          // cache slot -> the pending hit on it
	cycles     uint64            // cycles begun
	ageDue     time.Time         // no hit can be stale before this (zero: look; see ageHits)
	table      *table
	cache      *responseCache
	held       map[uint64][]*task // grouped members waiting for the rest
	prevJoined []bool             // joined ranks as of the last cycle
	joined     bool               // this rank has joined
	fresh      bool               // submissions or a Join arrived since the last begin
	abortNext  bool               // ask every rank to stop for a stall
	stall      stallInspector
	ctl        controlVector
	send       []byte    // this cycle's uncached requests
	tune       *autotune // nil unless autotuning (see startTuning)

	start       time.Time      // when the cycle in progress began
	ranksJoined []bool         // the joined ranks, as this cycle's exchange says
	fired       []*task        // this cycle's tasks from the response cache
	sizes       []int          // this cycle's payload sizes, when it gathers (reused)
	early       earlyAllreduce // the early all-reduce (see early.go)
}

// newNegotiator returns rank's negotiator in a job of size ranks, tuned by
// cfg's fusion threshold, cache capacity, stall times and OpTimeout, with
// early all-reduces in control vectors of up to earlyMax bytes (0: none).
func newNegotiator(rank, size int, cfg Config, earlyMax int) *negotiator {
	limit, sentinel := answerLimit(cfg.OpTimeout, cfg.StallShutdown)
	return &negotiator{
		rank: rank, size: size, fusion: cfg.FusionThreshold, limit: limit, sentinel: sentinel,
		pending: map[string]*entry{}, held: map[uint64][]*task{},
		table: newTable(size), cache: newResponseCache(cfg.CacheCapacity),
		prevJoined: make([]bool, size),
		stall:      newStallInspector(cfg.StallWarning, cfg.StallShutdown, cfg.OpTimeout),
		early:      newEarly(earlyMax),
	}
}

// logNote is a log record the negotiator asks the Engine to write; the
// negotiator itself writes nothing.
type logNote struct {
	level slog.Level
	msg   string
	args  []any
	stall StallKind // a stall warning (see Config.OnStall); "" for none
}

// submit takes a request submitted on this rank (en.slot -1, en.state
// entryUnsent); a cached one waits for its slot's bit.
func (n *negotiator) submit(en *entry) {
	n.pending[en.req.Name] = en
	n.fresh = true
	if slot, st := n.cache.lookup(&en.req); st == cacheHit {
		en.state, en.slot, en.hitCycle = entryHit, slot, n.cycles
		n.hits.set(slot, en)
	}
}

// join marks this rank joined from the next cycle on.
func (n *negotiator) join() { n.joined, n.fresh = true, true }

// outstanding returns the entries not yet handed out in tasks: those held
// in incomplete groups and those pending.
func (n *negotiator) outstanding() (held, pending []*entry) {
	for _, ts := range n.held {
		for _, t := range ts {
			if t.en != nil {
				held = append(held, t.en)
			}
		}
	}
	for _, en := range n.pending {
		pending = append(pending, en)
	}
	return held, pending
}

// pendingNames returns the k oldest names pending on this rank, oldest
// first, and how many more there are.
func (n *negotiator) pendingNames(k int) ([]string, int) {
	oldest := make([]*entry, 0, k+1)
	for _, en := range n.pending {
		at := len(oldest)
		for at > 0 && oldest[at-1].seq > en.seq {
			at--
		}
		if at < k {
			oldest = slices.Insert(oldest, at, en)[:min(len(oldest)+1, k)]
		}
	}
	names := make([]string, len(oldest))
	for i, en := range oldest {
		names[i] = en.req.Name
	}
	return names, len(n.pending) - len(names)
}

// hitTable holds the pending cache hits by slot: a slice indexed by slot,
// since slots are small integers and a small step has a hit or two, which
// a map would hash on every lookup and walk from a random start.
type hitTable struct {
	bySlot []*entry
	n      int
}

// get returns the pending hit on slot, or nil.
func (h *hitTable) get(slot int) *entry {
	if slot < 0 || slot >= len(h.bySlot) {
		return nil
	}
	return h.bySlot[slot]
}

// set records en as the pending hit on slot (which has none).
func (h *hitTable) set(slot int, en *entry) {
	for len(h.bySlot) <= slot {
		h.bySlot = append(h.bySlot, nil)
	}
	if h.bySlot[slot] == nil {
		h.n++
	}
	h.bySlot[slot] = en
}

// del forgets the pending hit on slot, if any.
func (h *hitTable) del(slot int) {
	if h.get(slot) != nil {
		h.bySlot[slot] = nil
		h.n--
	}
}

// len is the number of pending hits.
func (h *hitTable) len() int { return h.n }

// slots calls f with every slot that has a pending hit, in slot order; f
// may delete the hit it is called with.
func (h *hitTable) slots(f func(slot int, en *entry)) {
	for slot, en := range h.bySlot {
		if en != nil {
			f(slot, en)
		}
	}
}
