package hvd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
)

// ProcessSet is a subset of a job's ranks that runs collectives of its
// own, as Horovod's process sets do: each set has its own negotiation,
// fusion, response cache and stall inspector (an engine.Engine) over a
// communicator of just its ranks, so that operations on one set never
// wait for ranks outside it and sets, the global job included, run side
// by side. Sets may overlap. Runtime.AddProcessSet makes one and
// Runtime.RemoveProcessSet ends it; both are called by every rank of the
// job.
//
// Every collective of Runtime has a ProcessSet counterpart with the same
// meaning inside the set: sizes, averages and rank orders are those of the
// set, and ranks (a broadcast's root) are the job's ranks. A rank outside
// the set that calls one gets an error matching ErrNotInProcessSet; after
// RemoveProcessSet, ErrProcessSetRemoved (an operation that races with
// the removal may fail with ErrShutdown instead). Join, device tensors,
// the timeline and the package's slice and object helpers belong to the
// job alone; a set's engine takes the job's knobs.
//
// # Why a mesh of its own
//
// A set's communicator runs over links of its own, formed when the set
// is added through the connection machinery that forms the job's mesh
// (tcptransport.Connect, with the job's secret, TLS and shared-memory
// choices; the addresses are exchanged through the job's own engine),
// the way Horovod's Gloo backend builds a context per set. The
// alternative, multiplexing every set over the job's links with a channel
// per set, would need a demultiplexing reader per link (a Conn's Recv
// names the tag it expects, so frames of two communicators cannot share
// one link in any order), credit-based flow control so that one set's
// unread frames cannot block another's forever, bounded buffers, and a
// copy that the shared-memory rings avoid today; and it would put every
// global operation behind that layer. Separate links keep the transport
// contract as it is, give each set the same failure semantics as the job
// (a rank that dies closes its sockets, and every set it belongs to fails
// with collective.ErrPeerGone naming it; a stalled set ends at the op
// timeout), and close with the set: removing it shuts its engine down
// and closes its links, leaving nothing behind. The cost is a few sockets
// (or rings) per set and a mesh formation when the set is added, which
// Horovod's users also pay.
type ProcessSet struct {
	id     int
	ranks  []int    // the job's ranks in the set, ascending
	index  int      // this rank's position in ranks; -1 outside the set
	parent *Runtime // the job's runtime
	view   *Runtime // runs the set's collectives (its engine and Comm); nil outside the set

	mu       sync.Mutex
	removed  bool
	failure  error     // Err when the set was removed
	released sync.Once // the set's engine and links were closed
}

// ID numbers the set within its job: 1 for the first set added, 2 for the
// next, the same on every rank.
func (ps *ProcessSet) ID() int { return ps.id }

// Ranks returns the job's ranks in the set, in ascending order.
func (ps *ProcessSet) Ranks() []int { return slices.Clone(ps.ranks) }

// Size is the number of ranks in the set.
func (ps *ProcessSet) Size() int { return len(ps.ranks) }

// Rank is this rank's position in the set (0 for its lowest rank), or -1
// when this rank is not in it.
func (ps *ProcessSet) Rank() int { return ps.index }

// Included reports whether this rank is in the set.
func (ps *ProcessSet) Included() bool { return ps.index >= 0 }

// Err reports the failure that ended the set's communicator or engine on
// this rank (a peer of the set gone, a stall, a mismatch), or nil; it
// matches hvd's sentinels as operations' errors do. Outside the set it is
// nil; once the set is removed, it is the failure that came before.
func (ps *ProcessSet) Err() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.removed {
		return ps.failure
	}
	return ps.liveErr()
}

// liveErr is the failure of the set's communicator or engine, or nil.
func (ps *ProcessSet) liveErr() error {
	if ps.view == nil {
		return nil
	}
	if err := ps.view.comm.Err(); err != nil {
		return withSentinel(err)
	}
	if err := ps.view.engine.Err(); err != nil {
		return withSentinel(err)
	}
	return nil
}

// String describes the set, as in "process set 2 (ranks [0 2 3])".
func (ps *ProcessSet) String() string {
	return fmt.Sprintf("process set %d (ranks %v)", ps.id, ps.ranks)
}

// member returns the runtime that runs the set's collectives, or why this
// rank cannot run one named name.
func (ps *ProcessSet) member(op, name string) (*Runtime, error) {
	ps.mu.Lock()
	removed := ps.removed
	ps.mu.Unlock()
	switch {
	case removed:
		return nil, fmt.Errorf("hvd: %s %q on rank %d: %v: %w", op, name, ps.parent.Rank(), ps, ErrProcessSetRemoved)
	case ps.view == nil:
		return nil, fmt.Errorf("hvd: %s %q on rank %d: %v: %w", op, name, ps.parent.Rank(), ps, ErrNotInProcessSet)
	}
	return ps.view, nil
}

// markRemoved makes later operations on the set fail with
// ErrProcessSetRemoved. It reports whether the set was live.
func (ps *ProcessSet) markRemoved() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	live := !ps.removed
	if live {
		ps.failure = ps.liveErr()
	}
	ps.removed = true
	return live
}

// close marks the set removed and, on its ranks, shuts its engine down
// and closes its links. It returns once the engine's goroutines are gone.
// It is idempotent.
func (ps *ProcessSet) close() {
	ps.markRemoved()
	ps.released.Do(func() {
		v := ps.view
		if v == nil {
			return
		}
		v.mu.Lock()
		v.closed = true
		v.mu.Unlock()
		v.engine.Shutdown()
		v.comm.Close()
	})
}

// abort fails the set's communicator with cause, as the job's fails when
// the launcher goes away.
func (ps *ProcessSet) abort(cause error) {
	if ps.view != nil {
		ps.view.comm.Abort(cause)
	}
}

// processSets is a runtime's record of its process sets.
type processSets struct {
	add sync.Mutex // serialises AddProcessSet and RemoveProcessSet, which are collective

	mu     sync.Mutex // guards the fields below
	next   int        // the ID of the last set added
	live   map[int]*ProcessSet
	shut   bool               // the runtime shut down: no more sets
	stop   context.CancelFunc // cancels adds in progress, when the runtime shuts down
	base   context.Context    // what stop cancels; nil until the first add
	adding sync.WaitGroup     // adds in progress

	of *ProcessSet // on a set's own runtime (ProcessSet.view): the set
}

// begin starts an add or removal: it returns a context that the runtime's
// Shutdown cancels, and a function to call when done, or ErrShutdown.
func (s *processSets) begin(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return nil, nil, ErrShutdown
	}
	if s.base == nil {
		s.base, s.stop = context.WithCancel(context.Background())
	}
	s.adding.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.base, cancel)
	return ctx, func() { unhook(); cancel(); s.adding.Done() }, nil
}

// keep records ps as live, unless the runtime shut down meanwhile: then
// it closes ps and reports ErrShutdown.
func (s *processSets) keep(ps *ProcessSet) error {
	s.mu.Lock()
	shut := s.shut
	if !shut {
		if s.live == nil {
			s.live = map[int]*ProcessSet{}
		}
		s.live[ps.id] = ps
	}
	s.mu.Unlock()
	if shut {
		ps.close()
		return ErrShutdown
	}
	return nil
}

// drop forgets ps.
func (s *processSets) drop(ps *ProcessSet) {
	s.mu.Lock()
	delete(s.live, ps.id)
	s.mu.Unlock()
}

// list returns the live sets in the order they were added.
func (s *processSets) list() []*ProcessSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*ProcessSet, 0, len(s.live))
	for _, ps := range s.live {
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b *ProcessSet) int { return a.id - b.id })
	return out
}

// abortAll fails every live set's communicator with cause.
func (s *processSets) abortAll(cause error) {
	for _, ps := range s.list() {
		ps.abort(cause)
	}
}

// closeAll ends adds in progress and closes every set, for the runtime's
// Shutdown; it returns once their goroutines are gone.
func (s *processSets) closeAll() {
	s.mu.Lock()
	s.shut = true
	if s.stop != nil {
		s.stop()
	}
	s.mu.Unlock()
	s.adding.Wait()
	for _, ps := range s.list() {
		ps.close()
	}
	s.mu.Lock()
	s.live = nil
	s.mu.Unlock()
}

// ProcessSets returns the sets added and not removed, in the order they
// were added.
func (r *Runtime) ProcessSets() []*ProcessSet { return r.psets.list() }

// where names this rank in the error err of an operation: its rank in the
// job, and on a set's runtime the set and its rank there, and the job's
// ranks of the set's ranks that err blames (the engine and the Comm of a
// set number its ranks from 0).
func (r *Runtime) where(err error) string {
	ps := r.psets.of
	if ps == nil {
		return fmt.Sprintf("rank %d", r.Rank())
	}
	s := fmt.Sprintf("rank %d (set rank %d of %v", ps.parent.Rank(), ps.index, ps)
	if blamed := ps.jobRanks(blamedRanks(err)); blamed != "" {
		s += "; " + blamed
	}
	return s + ")"
}

// blamedRanks returns the ranks of the communicator that err says failed
// or did not answer.
func blamedRanks(err error) []int {
	var out []int
	if na, ok := errors.AsType[*engine.NoAnswerError](err); ok {
		out = append(append(out, na.Silent...), na.Gone...)
	}
	if oe, ok := errors.AsType[*collective.OpError](err); ok && oe.Peer >= 0 {
		out = append(out, oe.Peer)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// jobRanks says which of the job's ranks the set's ranks are, as in
// "set rank 2 is rank 3", or "" for none.
func (ps *ProcessSet) jobRanks(set []int) string {
	var parts []string
	for _, i := range set {
		if i >= 0 && i < len(ps.ranks) {
			parts = append(parts, fmt.Sprintf("set rank %d is rank %d", i, ps.ranks[i]))
		}
	}
	return strings.Join(parts, ", ")
}

// newSetRuntime makes the runtime that runs ps's collectives over tr, a
// transport among the set's ranks: a Comm and an engine of its own, with
// the job's knobs. It shares nothing with the job's runtime but its
// logger, environment and, to report which peer's failure failed this
// rank, gorun's rendezvous client; its Shutdown is never called (see
// ProcessSet.close).
func newSetRuntime(r *Runtime, ps *ProcessSet, tr collective.Transport) *Runtime {
	env := r.env
	env.Rank, env.Size = ps.index, len(ps.ranks)
	log := r.log.With("process_set", ps.id)
	v := &Runtime{env: env, log: log, launcher: r.launcher, rdv: r.rdv}
	v.psets.of = ps
	tr = v.reportPeerFailures(tr) // under gorun, a peer's failure is reported as the job's (blame.go)
	if b, ok := tr.(*blameTransport); ok {
		b.ranks = ps.ranks
	}
	hosts := r.setHosts(ps.ranks)
	v.comm = collective.NewComm(tr, r.commOptions(collective.Options{Hosts: hosts}))
	pub, head := r.pub, fmt.Sprintf("process set %d (job ranks %v; the ranks named below are positions in the set): ", ps.id, ps.ranks)
	onStall := func(s engine.Stall) { // the set's stall warnings are events of the job too
		pub.event(StallEvent, head+s.Text)
	}
	v.engine = engine.New(v.comm, engine.Config{Engine: r.env.Engine, Logger: log, OnStall: onStall})
	return v
}

// setMachines returns the machine of each of ranks (see
// tcptransport.Config.Machines), or nil where the runtime does not know
// them.
func (r *Runtime) setMachines(ranks []int) []string { return r.ofRanks(r.machineOf, ranks) }

// setHosts returns the host of each of ranks as small integers (see
// collective.Options.Hosts), or nil where the runtime does not know the
// ranks' hosts (a given transport).
func (r *Runtime) setHosts(ranks []int) []int {
	hosts := r.ofRanks(r.hostOf, ranks)
	if hosts == nil {
		return nil
	}
	return hostIndexes(hosts)
}

// ofRanks picks the entries of ranks from byRank, one per rank of the job,
// or returns nil where byRank does not have one for each.
func (r *Runtime) ofRanks(byRank []string, ranks []int) []string {
	if len(byRank) != r.env.Size {
		return nil
	}
	out := make([]string, len(ranks))
	for i, g := range ranks {
		out[i] = byRank[g]
	}
	return out
}

// setTransport is a set's transport, whose hosts name the job's ranks, so
// that a link error reads "peer 1 (rank 3 on host)".
type setTransport struct {
	collective.Transport
	ranks []int
}

// Host names peer's rank in the job and its host.
func (t setTransport) Host(peer int) string {
	if peer < 0 || peer >= len(t.ranks) {
		return t.Transport.Host(peer)
	}
	return fmt.Sprintf("rank %d on %s", t.ranks[peer], t.Transport.Host(peer))
}
