package engine

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
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
type stallInspector struct {
	warn, shutdown time.Duration // 0 disables each
	lastWarn       time.Time
}

// stallReport says which ranks are missing which names.
type stallReport struct {
	missing  [][]string    // by rank: the names it has not submitted, table order
	oldest   time.Duration // the longest wait among them
	tensors  int           // how many names are stalled
	warn     bool          // time to log a warning
	shutdown bool          // a name has waited past the shutdown time
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
// has waited past the threshold. A warning is due at most once per warning
// interval; shutdown is due once a name has waited the shutdown time.
func (s *stallInspector) check(now time.Time, entries []*tableEntry, joined []bool) *stallReport {
	limit := s.threshold()
	if limit <= 0 {
		return nil
	}
	rep := s.collect(now, entries, joined, limit)
	if rep == nil {
		return nil
	}
	rep.shutdown = s.shutdown > 0 && rep.oldest >= s.shutdown
	if s.warn > 0 && (s.lastWarn.IsZero() || now.Sub(s.lastWarn) >= s.warn) {
		rep.warn, s.lastWarn = true, now
	}
	return rep
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
		for r, req := range e.reqs {
			if req == nil && !joined[r] {
				rep.missing[r] = append(rep.missing[r], e.name)
			}
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

// String is the whole report in one line.
func (r *stallReport) String() string {
	return fmt.Sprintf("%d tensor(s) submitted by some ranks have waited up to %v for the others; missing ranks: %s; %s",
		r.tensors, r.oldest.Round(time.Millisecond), r.ranks(), stallHint)
}

// err is the error every rank's pending operations fail with when the
// stall lasts past the shutdown time.
func (r *stallReport) err(after time.Duration) error {
	return fmt.Errorf("%w: shutting down after a stall of more than %v: %s", ErrStall, after, r)
}

// inspect runs the stall inspector over the message table at now, after a
// cycle's tasks: on rank 0 it returns a warning naming the missing ranks
// for the Engine to log; past the shutdown time it asks every rank, in the
// next cycle, to stop.
func (n *negotiator) inspect(now time.Time) *logNote {
	if n.table.len() == 0 {
		return nil
	}
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
	return &logNote{level: slog.LevelWarn, msg: "collective: stalled tensors: some ranks submitted tensors that other ranks have not",
		args: []any{"tensors", rep.tensors, "waited", rep.oldest.Round(time.Millisecond), "missing", rep.ranks(), "hint", stallHint}}
}
