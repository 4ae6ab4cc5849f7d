package engine

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// stallNames is how many names per rank a stall report lists.
const stallNames = 6

// stallHint names the usual causes of a stall.
const stallHint = "likely causes: ranks ran out of data at different steps " +
	"(uneven data: let finished ranks call Join), or control flow that depends on the rank " +
	"submits tensors, or tensor names, on some ranks only"

// stallInspector watches the message table for names that some ranks have
// submitted and others have not. Time comes from the caller, so it is
// tested without sleeping.
//
// A stalled name ends the job after shutdown: the stall shutdown time or
// OpTimeout, whichever is shorter and set (see newStallInspector), since a
// name that waits for other ranks is a wait for another rank that
// OpTimeout bounds, whether those ranks negotiate or not. Warnings repeat
// while a stall lasts at intervals that double from warn, up to
// stallRepeatMax times warn, and stop once the shutdown is decided.
type stallInspector struct {
	warn     time.Duration // first warning, and the first repeat interval; 0: no warnings
	shutdown time.Duration // 0: never
	byOp     bool          // shutdown is OpTimeout's
	lastWarn time.Time     // the last warning of the stall in progress; zero: none
	every    time.Duration // the interval to the next warning
}

// stallRepeatMax caps the interval between repeated warnings of one stall
// at this many times the warning time.
const stallRepeatMax = 16

// newStallInspector returns the inspector for the stall warning time warn,
// the stall shutdown time and OpTimeout op: a stalled name ends the job
// after the limit that bounds each exchange hop too (see answerLimit).
func newStallInspector(warn, shutdown, op time.Duration) stallInspector {
	limit, sentinel := answerLimit(op, shutdown)
	return stallInspector{warn: warn, shutdown: limit, byOp: sentinel == collective.ErrTimeout}
}

// stallReport says which ranks are missing which names.
type stallReport struct {
	missing  [][]string    // by rank: the names it has not submitted, table order
	names    []stalledName // the first stallNames stalled names, table order
	oldest   time.Duration // the longest wait among them
	tensors  int           // how many names are stalled
	warn     bool          // time to log a warning
	shutdown bool          // a name has waited past the shutdown time
}

// stalledName is a stalled name and the ranks that submitted it.
type stalledName struct {
	name string
	by   []int
}

// threshold is the wait after which a name counts as stalled (0: never).
func (s *stallInspector) threshold() time.Duration {
	switch {
	case s.warn > 0 && (s.shutdown <= 0 || s.warn <= s.shutdown):
		return s.warn
	default:
		return s.shutdown
	}
}

// check inspects the waiting entries at now. It returns nil when nothing
// has waited past the threshold. Shutdown is due once a name has waited
// the shutdown time; a warning is due first at the warning time and then
// at doubling intervals while the stall lasts, but not with the shutdown.
func (s *stallInspector) check(now time.Time, entries []*tableEntry, joined []bool) *stallReport {
	limit := s.threshold()
	if limit <= 0 {
		return nil
	}
	rep := s.collect(now, entries, joined, limit)
	if rep == nil {
		s.quiet()
		return nil
	}
	rep.shutdown = s.shutdown > 0 && rep.oldest >= s.shutdown
	if rep.shutdown || s.warn <= 0 {
		return rep
	}
	switch {
	case s.lastWarn.IsZero():
		s.every = s.warn
	case now.Sub(s.lastWarn) >= s.every:
		s.every = min(2*s.every, stallRepeatMax*s.warn)
	default:
		return rep
	}
	rep.warn, s.lastWarn = true, now
	return rep
}

// quiet records that no name is stalled: the next stall warns afresh.
func (s *stallInspector) quiet() { s.lastWarn, s.every = time.Time{}, 0 }

// limitName names the limit that ends a stall, for messages.
func (s *stallInspector) limitName() string {
	if s.byOp {
		return "the operation timeout"
	}
	return "the stall shutdown time"
}

// collect reports the entries that have waited at least limit, or nil.
func (s *stallInspector) collect(now time.Time, entries []*tableEntry, joined []bool, limit time.Duration) *stallReport {
	rep := &stallReport{missing: make([][]string, len(joined))}
	for _, e := range entries {
		age := now.Sub(earliest(e.seen))
		if age < limit {
			continue
		}
		rep.tensors++
		rep.oldest = max(rep.oldest, age)
		named := len(rep.names) < stallNames
		var by []int
		for r, req := range e.reqs {
			switch {
			case req != nil && named:
				by = append(by, r)
			case req == nil && !joined[r]:
				rep.missing[r] = append(rep.missing[r], e.name)
			}
		}
		if named {
			rep.names = append(rep.names, stalledName{name: e.name, by: by})
		}
	}
	if rep.tensors == 0 {
		return nil
	}
	return rep
}

// earliest is the earliest non-zero time in ts.
func earliest(ts []time.Time) time.Time {
	var first time.Time
	for _, t := range ts {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// ranks lists the missing ranks with their first few names:
// "rank 1: [a b c ...]; rank 3: [x]".
func (r *stallReport) ranks() string {
	var b strings.Builder
	for rank, names := range r.missing {
		if len(names) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		shown := names[:min(len(names), stallNames)]
		fmt.Fprintf(&b, "rank %d: [%s", rank, strings.Join(shown, " "))
		if len(names) > len(shown) {
			fmt.Fprintf(&b, " ... %d more", len(names)-len(shown))
		}
		b.WriteString("]")
	}
	return b.String()
}

// submitted lists the first few stalled names with the ranks that
// submitted them: "a (submitted by rank 0), b (submitted by ranks [1 2])".
func (r *stallReport) submitted() string {
	var b strings.Builder
	for i, sn := range r.names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (submitted by %s)", sn.name, rankList(sn.by))
	}
	if more := r.tensors - len(r.names); more > 0 {
		fmt.Fprintf(&b, " ... %d more", more)
	}
	return b.String()
}

// String is the whole report in one line.
func (r *stallReport) String() string {
	return fmt.Sprintf("%d tensor(s) submitted by some ranks have waited up to %v for the others: %s; missing ranks: %s; %s",
		r.tensors, r.oldest.Round(time.Millisecond), r.submitted(), r.ranks(), stallHint)
}

// err is the error every rank's pending operations fail with when the
// stall lasts past the inspector's shutdown time: ErrStall, and
// collective.ErrTimeout too where OpTimeout is that time.
func (r *stallReport) err(s *stallInspector) error {
	if s.byOp {
		return fmt.Errorf("%w: shutting down after tensors waited for other ranks longer than the operation timeout %v: %s: %w",
			ErrStall, s.shutdown, r, collective.ErrTimeout)
	}
	return fmt.Errorf("%w: shutting down after a stall of more than %v: %s", ErrStall, s.shutdown, r)
}

// stopErr is the error of a rank that stops for a stall that another rank
// saw but its own message table does not show.
func (s *stallInspector) stopErr() error {
	if s.byOp {
		return fmt.Errorf("%w: a rank stopped the job for tensors that waited longer than the operation timeout %v: %w",
			ErrStall, s.shutdown, collective.ErrTimeout)
	}
	return fmt.Errorf("%w: a rank stopped the job for a stall of more than %v", ErrStall, s.shutdown)
}

// inspect runs the stall inspector over the message table at now, after a
// cycle's tasks: on rank 0 it returns a warning naming the tensors and the
// missing ranks for the Engine to log; past the shutdown time it asks
// every rank, in the next cycle's exchange, to stop, so that every rank
// stops in that cycle with the report of the same message table.
func (n *negotiator) inspect(now time.Time) *logNote {
	rep := n.stall.check(now, n.table.waiting(), n.ranksJoined)
	if rep == nil {
		return nil
	}
	if rep.shutdown {
		n.abortNext = true
	}
	if !rep.warn || n.rank != 0 {
		return nil
	}
	ends := "never (no stall shutdown time or operation timeout)"
	if n.stall.shutdown > 0 {
		ends = fmt.Sprintf("after %v (%s)", n.stall.shutdown, n.stall.limitName())
	}
	return &logNote{level: slog.LevelWarn, stall: StallTensors, msg: "engine: stalled tensors: some ranks submitted tensors that other ranks have not",
		args: []any{"tensors", rep.tensors, "waited", rep.oldest.Round(time.Millisecond), "submitted", rep.submitted(),
			"missing", rep.ranks(), "fails", ends, "hint", stallHint}}
}
