package metrics

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Default bounds of a Store.
const (
	DefaultMaxPoints        = 2048
	DefaultMaxSeries        = 256
	DefaultMaxEvents        = 1000
	DefaultSubscriberBuffer = 64
)

// Names of the runtime series that the Store reads into RankInfo.
const (
	StepName          = "hvd/step"
	StepSecondsName   = "hvd/step_seconds"
	CommShareName     = "hvd/comm_share"
	DroppedPointsName = "hvd/dropped_points"
	// The series of a parameter-server job that fill the rows of its
	// workers (PSGlobalStepName, PSStepSecondsName) and servers
	// (PSServerStepName).
	PSGlobalStepName  = "ps/global_step"
	PSStepSecondsName = "ps/step_seconds"
	PSServerStepName  = "ps/server_step"
	// LinkSentPrefix starts the names of the per-link series: the bytes
	// a rank sent to peer P are "hvd/link_sent_bytes/P" (the peer is in
	// the name, as Point has no labels); "hvd/link_recv_bytes/P" likewise.
	// metrics.jsonl and /metrics give the peer apart (SplitPeer).
	LinkSentPrefix = "hvd/link_sent_bytes/"
	LinkRecvPrefix = "hvd/link_recv_bytes/"
	// PSPushStalenessPrefix starts a parameter server's per-worker series:
	// "ps/server_push_staleness/P" is the staleness of the last push of
	// the worker of rank P that the server applied.
	PSPushStalenessPrefix = "ps/server_push_staleness/"
)

// peerPrefixes start the names of the runtime series that end in a peer's
// rank.
var peerPrefixes = []string{LinkSentPrefix, LinkRecvPrefix, PSPushStalenessPrefix}

// SplitPeer splits the name of a per-peer runtime series (one of a link,
// "hvd/link_sent_bytes/P" or "hvd/link_recv_bytes/P", or a parameter
// server's "ps/server_push_staleness/P") into the name without the peer
// ("hvd/link_sent_bytes") and the peer P, a rank. ok is false for every
// other series, scalars included.
func SplitPeer(kind Kind, name string) (base string, peer int, ok bool) {
	if kind != Runtime {
		return "", 0, false
	}
	for _, prefix := range peerPrefixes {
		if p, found := strings.CutPrefix(name, prefix); found {
			if n, err := strconv.Atoi(p); err == nil && n >= 0 && p == strconv.Itoa(n) {
				return prefix[:len(prefix)-1], n, true
			}
		}
	}
	return "", 0, false
}

// Config bounds a Store. Zero fields take the defaults.
type Config struct {
	// Job labels the job in snapshots (the program and np; never the
	// secret or the environment).
	Job string
	// MaxPoints bounds each series (at least 4): when a series is full,
	// every other point is dropped, keeping the first; the newest point
	// is always kept, so a long run keeps its whole shape at half the
	// resolution each time it fills.
	MaxPoints int
	// MaxSeries bounds the series of one rank; points of further names
	// are dropped and counted (Store.DroppedSeries).
	MaxSeries int
	// MaxEvents bounds the events kept (the most recent).
	MaxEvents int
	// SubscriberBuffer is the capacity of each subscriber's channel.
	SubscriberBuffer int
	// Out, if not nil, receives every accepted point and event; Close
	// closes it.
	Out *Writer
	// Logger receives the Store's warnings; nil discards them.
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Store keeps a job's metrics in bounded memory and implements Source.
// It is safe for concurrent use; Add never blocks on a subscriber.
type Store struct {
	cfg   Config
	start time.Time

	droppedSeries atomic.Int64 // points dropped because their rank had MaxSeries series
	accepted      atomic.Int64 // points accepted

	mu     sync.RWMutex // Snapshot reads under RLock, so that readers wait on each other only
	ranks  map[int]*rankState
	events []Event // a ring of at most MaxEvents
	evNext int     // where the next event goes once the ring is full
	subs   map[*subscriber]struct{}
	// scratch holds Add's points while nobody subscribes (see Add).
	scratch []Point
	ended   bool
	closed  bool
}

// rankState is one rank's row and series.
type rankState struct {
	info   RankInfo
	series map[seriesKey]*series
	order  []seriesKey // in order of creation, for stable snapshots
	warned bool        // a "dropped" event was recorded for too many series
}

type seriesKey struct {
	kind Kind
	name string
}

// series is one bounded series; see Config.MaxPoints for its thinning.
// Points at indexes seen%stride == 0 are kept; loose marks a last point
// that is not one of them, held only until the next point arrives.
type series struct {
	steps  []int64
	values []float64
	seen   int64
	stride int64
	loose  bool
}

// subscriber is one Subscribe channel. resync is set while the channel
// was drained to make room for an Update with Resync.
type subscriber struct {
	ch chan Update
}

// NewStore returns an empty Store bounded by cfg.
func NewStore(cfg Config) *Store {
	if cfg.MaxPoints <= 0 {
		cfg.MaxPoints = DefaultMaxPoints
	}
	cfg.MaxPoints = max(cfg.MaxPoints, 4)
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{cfg: cfg, start: cfg.Now(), ranks: map[int]*rankState{}, subs: map[*subscriber]struct{}{}}
}

// rank returns rank r's state, creating it; s.mu is held.
func (s *Store) rank(r int) *rankState {
	rs := s.ranks[r]
	if rs == nil {
		rs = &rankState{info: RankInfo{Rank: r, State: "starting"}, series: map[seriesKey]*series{}}
		s.ranks[r] = rs
	}
	return rs
}

// Add records points (of any ranks): each goes into its series, the
// runtime ones also into their rank's RankInfo, then to Out and to the
// subscribers. A point whose rank already has MaxSeries other series is
// dropped and counted. Points with a zero Time get the Store's clock; an
// empty Host takes the rank's (SetRank). Add does nothing after Close.
func (s *Store) Add(points []Point) {
	if len(points) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.cfg.Now()
	// What is kept goes to Out and, in an Update, to the subscribers,
	// which keep it: a new slice only when there are some, else the
	// Store's own, reused (Out is done with it when WritePoints returns).
	shared := len(s.subs) > 0
	kept := s.scratch[:0]
	if shared {
		kept = make([]Point, 0, len(points))
	}
	var touched []int // ranks whose row changed
	var last *rankState
	for _, p := range points {
		rs := last
		if rs == nil || rs.info.Rank != p.Rank {
			rs = s.rank(p.Rank)
			last = rs
		}
		sr := s.seriesFor(rs, seriesKey{p.Kind, p.Name}, now)
		if sr == nil {
			continue
		}
		sr.add(p.Step, p.Value, s.cfg.MaxPoints)
		if p.Time.IsZero() {
			p.Time = now
		}
		if p.Host == "" {
			p.Host = rs.info.Host
		}
		if p.Kind == Runtime && rs.info.apply(p.Name, p.Value) && !slices.Contains(touched, p.Rank) {
			touched = append(touched, p.Rank)
		}
		kept = append(kept, p)
	}
	if !shared {
		s.scratch = kept[:0]
	}
	if len(kept) == 0 {
		return
	}
	s.accepted.Add(int64(len(kept)))
	if s.cfg.Out != nil {
		s.cfg.Out.WritePoints(kept)
	}
	if !shared {
		clear(kept) // drop the strings it holds
		return
	}
	u := Update{Points: kept}
	for _, r := range touched {
		u.Ranks = append(u.Ranks, s.ranks[r].info.clone())
	}
	slices.SortFunc(u.Ranks, func(a, b RankInfo) int { return a.Rank - b.Rank })
	s.publishLocked(u)
}

// seriesFor returns the series k of rs, creating it, or nil when rs has
// MaxSeries other series (the point is dropped and counted, and the first
// time an event says so); s.mu is held.
func (s *Store) seriesFor(rs *rankState, k seriesKey, now time.Time) *series {
	if sr := rs.series[k]; sr != nil {
		return sr
	}
	if len(rs.series) >= s.cfg.MaxSeries {
		s.droppedSeries.Add(1)
		if !rs.warned {
			rs.warned = true
			s.eventLocked(Event{Time: now, Rank: rs.info.Rank, Kind: "dropped",
				Text: "rank " + strconv.Itoa(rs.info.Rank) + " has " + strconv.Itoa(s.cfg.MaxSeries) + " series; points of further names are dropped (first: " + k.name + ")"})
		}
		return nil
	}
	sr := &series{stride: 1, steps: make([]int64, 0, 16), values: make([]float64, 0, 16)}
	rs.series[k] = sr
	rs.order = append(rs.order, k)
	return sr
}

// apply reads the runtime point name = v into the row and reports
// whether it changed.
func (ri *RankInfo) apply(name string, v float64) bool {
	switch {
	case name == StepName, name == PSGlobalStepName, name == PSServerStepName:
		ri.Step = int64(v)
	case name == StepSecondsName, name == PSStepSecondsName:
		ri.StepSeconds = v
	case name == CommShareName:
		ri.CommShare = v
	case name == DroppedPointsName:
		ri.Dropped = int64(v)
	case strings.HasPrefix(name, LinkSentPrefix):
		peer, err := strconv.Atoi(name[len(LinkSentPrefix):])
		if err != nil || peer < 0 {
			return false
		}
		if ri.LinkBytes == nil {
			ri.LinkBytes = map[int]float64{}
		}
		ri.LinkBytes[peer] = v
	default:
		return false
	}
	return true
}

// clone copies the row (its map included).
func (ri RankInfo) clone() RankInfo {
	if ri.LinkBytes != nil {
		m := make(map[int]float64, len(ri.LinkBytes))
		for k, v := range ri.LinkBytes {
			m[k] = v
		}
		ri.LinkBytes = m
	}
	return ri
}

// add appends a point, thinning the series when it holds more than max.
func (sr *series) add(step int64, v float64, limit int) {
	if sr.loose { // the last point was only held as the newest
		sr.steps, sr.values = sr.steps[:len(sr.steps)-1], sr.values[:len(sr.values)-1]
		sr.loose = false
	}
	sr.steps, sr.values = append(sr.steps, step), append(sr.values, v)
	sr.loose = sr.seen%sr.stride != 0
	sr.seen++
	if len(sr.steps) <= limit {
		return
	}
	// Keep the points at even positions among the kept ones (indexes
	// 0, 2·stride, 4·stride, …), then the newest if it went.
	n := len(sr.steps)
	if sr.loose {
		n--
	}
	lastStep, lastValue := sr.steps[len(sr.steps)-1], sr.values[len(sr.values)-1]
	j := 0
	for i := 0; i < n; i += 2 {
		sr.steps[j], sr.values[j] = sr.steps[i], sr.values[i]
		j++
	}
	newestKept := !sr.loose && (n-1)%2 == 0
	sr.steps, sr.values = sr.steps[:j], sr.values[:j]
	sr.stride *= 2
	sr.loose = false
	if !newestKept {
		sr.steps, sr.values = append(sr.steps, lastStep), append(sr.values, lastValue)
		sr.loose = true
	}
}

// AddEvent records e (a zero Time gets the Store's clock), keeping the
// most recent MaxEvents, and passes it to Out and the subscribers.
func (s *Store) AddEvent(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if e.Time.IsZero() {
		e.Time = s.cfg.Now()
	}
	s.eventLocked(e)
}

// eventLocked records, writes and publishes e; s.mu is held.
func (s *Store) eventLocked(e Event) {
	if len(s.events) < s.cfg.MaxEvents {
		s.events = append(s.events, e)
	} else {
		s.events[s.evNext] = e
		s.evNext = (s.evNext + 1) % s.cfg.MaxEvents
	}
	if s.cfg.Out != nil {
		s.cfg.Out.WriteEvent(e)
	}
	s.publishLocked(Update{Events: []Event{e}})
}

// SetRank sets rank's host (unless host is empty) and state (unless
// state is empty): "starting", "running", "exited", "failed", "killed".
func (s *Store) SetRank(rank int, host, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	rs := s.rank(rank)
	if host != "" {
		rs.info.Host = host
	}
	if state != "" {
		rs.info.State = state
	}
	s.publishLocked(Update{Ranks: []RankInfo{rs.info.clone()}})
}

// SetRole sets rank's role (RankInfo.Role).
func (s *Store) SetRole(rank int, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	rs := s.rank(rank)
	rs.info.Role = role
	s.publishLocked(Update{Ranks: []RankInfo{rs.info.clone()}})
}

// End marks the job ended and tells the subscribers.
func (s *Store) End() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended {
		return
	}
	s.ended = true
	s.publishLocked(Update{Ended: true})
}

// Close ends the Store: it closes every subscriber's channel and Out
// (flushing it). Later calls of Add, AddEvent and SetRank do nothing;
// Snapshot still answers. Close is idempotent and returns Out's error.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for sub := range s.subs {
		close(sub.ch)
	}
	clear(s.subs)
	s.mu.Unlock()
	if s.cfg.Out != nil {
		return s.cfg.Out.Close()
	}
	return nil
}

// publishLocked hands u to every subscriber without blocking: one whose
// channel is full has its pending updates taken back and gets a single
// Update with Resync set instead (read a Snapshot). s.mu is held, so
// the Store is the only sender and the Resync always fits.
func (s *Store) publishLocked(u Update) {
	for sub := range s.subs {
		select {
		case sub.ch <- u:
			continue
		default:
		}
	drain:
		for {
			select {
			case <-sub.ch:
			default:
				break drain
			}
		}
		select {
		case sub.ch <- Update{Resync: true, Ended: s.ended}:
		default: // unreachable: the channel was just emptied by the only sender
		}
	}
}

// Subscribe returns a channel of updates (see Update; the slices in an
// Update are shared: do not modify them) and a function that cancels the
// subscription and closes the channel. Points in updates after one with
// Resync may also be in the Snapshot read after it.
func (s *Store) Subscribe() (<-chan Update, func()) {
	sub := &subscriber{ch: make(chan Update, s.cfg.SubscriberBuffer)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	s.subs[sub] = struct{}{}
	if s.ended {
		sub.ch <- Update{Ended: true}
	}
	return sub.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[sub]; ok {
			delete(s.subs, sub)
			close(sub.ch)
		}
	}
}

// Snapshot copies everything the Store holds: ranks by rank, series by
// rank then in the order they appeared, events oldest first.
func (s *Store) Snapshot() Snapshot {
	s.mu.RLock() // many readers at once; a writer waits for those under way only
	defer s.mu.RUnlock()
	snap := Snapshot{Job: s.cfg.Job, Start: s.start, Ended: s.ended}
	ranks := make([]int, 0, len(s.ranks))
	for r := range s.ranks {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	for _, r := range ranks {
		rs := s.ranks[r]
		snap.Ranks = append(snap.Ranks, rs.info.clone())
		for _, k := range rs.order {
			sr := rs.series[k]
			snap.Series = append(snap.Series, Series{Rank: r, Kind: k.kind, Name: k.name,
				Steps: slices.Clone(sr.steps), Values: slices.Clone(sr.values)})
		}
	}
	snap.Events = make([]Event, 0, len(s.events))
	snap.Events = append(snap.Events, s.events[s.evNext:]...)
	snap.Events = append(snap.Events, s.events[:s.evNext]...)
	return snap
}

// DroppedSeries counts the points dropped because their rank already had
// MaxSeries series.
func (s *Store) DroppedSeries() int64 { return s.droppedSeries.Load() }

// Accepted counts the points the Store has accepted.
func (s *Store) Accepted() int64 { return s.accepted.Load() }

var _ Source = (*Store)(nil)
