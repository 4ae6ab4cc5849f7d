package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/settings"
)

// TestNegotiatorSameOrderEveryRank: whatever the order and the cycle in
// which each rank submits the names, every rank decides each name once,
// in the same cycle and the same order as every other rank; a second step
// of the same names does the same from the response cache.
func TestNegotiatorSameOrderEveryRank(t *testing.T) {
	for _, c := range []struct {
		name   string
		orders [][]string // by rank: submission order
		delays []int      // by rank: the cycle in which it submits
		cache  int
	}{
		{"one rank", [][]string{{"a", "b", "c"}}, []int{0}, 16},
		{"shuffled", [][]string{{"a", "b", "c", "d"}, {"d", "c", "b", "a"}, {"b", "d", "a", "c"}}, []int{0, 0, 0}, 16},
		{"staggered", [][]string{{"a", "b", "c", "d"}, {"c", "a", "d", "b"}, {"d", "b", "c", "a"}}, []int{0, 2, 1}, 16},
		{"last rank first", [][]string{{"x", "y"}, {"y", "x"}}, []int{3, 0}, 16},
		{"no cache", [][]string{{"a", "b", "c", "d"}, {"d", "c", "b", "a"}, {"b", "d", "a", "c"}}, []int{1, 0, 2}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLockstep(t, len(c.orders), tuning{cache: c.cache})
			for step := range 2 {
				fired, cached := runStep(t, l, c.orders, c.delays)
				got := slices.Sorted(slices.Values(fired))
				if want := slices.Sorted(slices.Values(c.orders[0])); !slices.Equal(got, want) {
					t.Fatalf("step %d: decided %v, want each of %v once", step, fired, want)
				}
				if want := step * min(c.cache, len(fired)); cached != want {
					t.Fatalf("step %d: %d from the cache, want %d", step, cached, want)
				}
			}
		})
	}
}

// runStep submits each rank's names in its delay's cycle and runs cycles
// until every name is decided; it returns the names in decision order and
// how many came from the cache.
func runStep(t *testing.T, l *lockstep, orders [][]string, delays []int) (fired []string, cached int) {
	t.Helper()
	for cycle := 0; len(fired) < len(orders[0]); cycle++ {
		if cycle > 10 {
			t.Fatalf("after %d cycles only %v are decided", cycle, fired)
		}
		for r, order := range orders {
			if delays[r] == cycle {
				for _, name := range order {
					l.submit(r, ar(name, 2))
				}
			}
		}
		cs := l.cycle()
		firedNames(t, cs)
		fired = append(fired, names(cs[0].tasks)...)
		cached += cs[0].cached
	}
	return fired, cached
}

// TestNegotiatorHoldsMissingName: a name that one rank has not submitted
// waits; the stall inspector warns on rank 0, naming the missing rank,
// after the warning time, and after the shutdown time every rank stops
// with ErrStall while the name is still pending where it was submitted.
func TestNegotiatorHoldsMissingName(t *testing.T) {
	l := newLockstep(t, 3, tuning{warn: 10 * time.Second, shutdown: 30 * time.Second})
	l.submit(0, ar("a", 1), ar("b", 1))
	l.submit(1, ar("b", 1), ar("a", 1))
	l.submit(2, ar("a", 1))
	if got := firedNames(t, l.cycle()); got != "[a]" {
		t.Fatalf("first cycle decided %s, want [a]", got)
	}
	l.now = t0.Add(11 * time.Second)
	cs := l.cycle()
	if got := firedNames(t, cs); got != "[]" {
		t.Fatalf("decided %s while rank 2 misses b", got)
	}
	checkStallNote(t, cs, slog.LevelWarn, "rank 2: [b]")
	l.now = t0.Add(31 * time.Second)
	l.cycle()
	cs = l.cycle()
	for r, c := range cs {
		if !errors.Is(c.err, ErrStall) || !strings.Contains(c.err.Error(), "rank 2: [b]") || c.abort {
			t.Fatalf("rank %d after the shutdown time: %v (abort %v)", r, c.err, c.abort)
		}
	}
	checkStallNote(t, cs, slog.LevelError, "shutting down")
	for r, n := range l.ns[:2] {
		if _, pending := n.outstanding(); len(pending) != 1 || pending[0].req.Name != "b" {
			t.Fatalf("rank %d: outstanding %v, want b", r, pending)
		}
	}
}

// checkStallNote checks that rank 0, and no other rank, has a log note of
// level, from the agreement or the inspector, whose text contains want.
func checkStallNote(t *testing.T, cs []rankCycle, level slog.Level, want string) {
	t.Helper()
	for r, c := range cs {
		n := c.note
		if n == nil {
			n = c.inspected
		}
		switch {
		case r > 0 && n != nil:
			t.Fatalf("rank %d logs %q; only rank 0 speaks for the job", r, n.msg)
		case r == 0 && (n == nil || n.level != level || !strings.Contains(fmt.Sprint(n.msg, n.args), want)):
			t.Fatalf("rank 0: note %+v, want a %v naming %q", n, level, want)
		}
	}
}

// TestNegotiatorMismatch: ranks that disagree on a name fail it on every
// rank with the same MismatchError, and go on with the other names.
func TestNegotiatorMismatch(t *testing.T) {
	f64 := ar("x", 2)
	f64.DType = kernels.F64
	maxOp := ar("x", 2)
	maxOp.ReduceOp = kernels.Max
	for _, c := range []struct {
		field string
		odd   Request
	}{
		{"shape", ar("x", 3)},
		{"dtype", f64},
		{"reduce op", maxOp},
	} {
		t.Run(c.field, func(t *testing.T) {
			l := newLockstep(t, 3, tuning{cache: 8})
			l.submit(0, ar("x", 2), ar("y", 1))
			l.submit(1, ar("y", 1), c.odd)
			l.submit(2, ar("x", 2), ar("y", 1))
			cs := l.cycle()
			if got := firedNames(t, cs); got != "[x y]" {
				t.Fatalf("decided %s, want [x y]", got)
			}
			want := &MismatchError{Name: "x", Field: c.field, RankA: 0, ValueA: valueOf(c.field, ar("x", 2)), RankB: 1, ValueB: valueOf(c.field, c.odd)}
			for r, rc := range cs {
				var me *MismatchError
				if !errors.As(rc.tasks[0].err, &me) || !reflect.DeepEqual(me, want) || rc.tasks[1].err != nil {
					t.Fatalf("rank %d: %v, %v; want %v for x only", r, rc.tasks[0].err, rc.tasks[1].err, want)
				}
			}
		})
	}
}

// valueOf prints a request's field as MismatchError does.
func valueOf(field string, r Request) string {
	switch field {
	case "dtype":
		return r.DType.String()
	case "reduce op":
		return r.ReduceOp.String()
	}
	return fmt.Sprint(r.Shape)
}

// TestNegotiatorShutdownSeenByOthers: a rank that announces its shutdown
// stops every other rank with ErrShutdown, naming it.
func TestNegotiatorShutdownSeenByOthers(t *testing.T) {
	l := newLockstep(t, 3, tuning{})
	l.submit(0, ar("a", 1))
	l.submit(2, ar("a", 1))
	cs := l.cycle(1)
	for r, c := range cs {
		if r == 1 {
			if c.err != nil {
				t.Fatalf("the stopping rank itself fails: %v", c.err)
			}
			continue
		}
		if !errors.Is(c.err, ErrShutdown) || !strings.Contains(c.err.Error(), "rank [1] shut down") || c.abort {
			t.Fatalf("rank %d: %v (abort %v), want ErrShutdown naming rank 1", r, c.err, c.abort)
		}
	}
}

// TestNegotiatorNoAnswer: a rank that some rank marked silent in the
// exchanged vector stops every rank with the same NoAnswerError, which
// also fails the Comm.
func TestNegotiatorNoAnswer(t *testing.T) {
	l := newLockstep(t, 3, tuning{opTime: time.Second})
	l.submit(0, ar("w", 1))
	props, ctl := l.propose()
	ctl[l.ns[0].ctl.answerAt(2)] = collective.AnswerSilent
	for r, c := range l.follow(props, ctl) {
		var na *NoAnswerError
		if !errors.As(c.err, &na) || !c.abort || !slices.Equal(na.Silent, []int{2}) || na.Rank != r ||
			na.Limit != time.Second || !errors.Is(c.err, collective.ErrTimeout) || c.note == nil {
			t.Fatalf("rank %d: %v (abort %v, note %v), want a NoAnswerError naming rank 2", r, c.err, c.abort, c.note)
		}
		if want := r == 0; (len(na.Pending) == 1 && na.Pending[0] == "w") != want {
			t.Fatalf("rank %d: pending %v", r, na.Pending)
		}
	}
}

// TestNegotiatorBadPayload: gathered bytes that do not decode are an error
// naming the rank that sent them.
func TestNegotiatorBadPayload(t *testing.T) {
	l := newLockstep(t, 2, tuning{})
	l.submitAll(ar("a", 1))
	props, ctl := l.propose()
	n := l.ns[1]
	a := n.exchanged(ctl, l.now)
	if a.err != nil || len(a.gather) != 2 {
		t.Fatalf("agreement %+v, want a gather", a)
	}
	bad := make([]byte, len(props[0].payload)+len(props[1].payload))
	for i := range bad {
		bad[i] = 0xFF
	}
	if err := n.gathered(bad, n.start); err == nil || !strings.Contains(err.Error(), "requests from rank 0") {
		t.Fatalf("gathered garbage: %v", err)
	}
}

// TestNegotiatorMismatchEndsWithDefaults: with the default knobs, rank 0
// waiting with "a" and rank 1 with "b" is not left to wait forever. Rank 0
// warns at the stall warning time and then at doubling intervals (60 s,
// 120 s, 240 s, 480 s); once the names have waited the default OpTimeout
// (10 min), every rank stops in the same cycle with ErrStall and
// ErrTimeout naming both tensors and the ranks.
func TestNegotiatorMismatchEndsWithDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.StallShutdown != 0 || cfg.OpTimeout != settings.DefaultOpTimeout || cfg.OpTimeout <= 0 {
		t.Fatalf("defaults: stall shutdown %v, OpTimeout %v", cfg.StallShutdown, cfg.OpTimeout)
	}
	l := newLockstep(t, 2, tuning{fusion: cfg.FusionThreshold, cache: cfg.CacheCapacity,
		warn: cfg.StallWarning, shutdown: cfg.StallShutdown, opTime: cfg.OpTimeout})
	l.submit(0, ar("a", 1))
	l.submit(1, ar("b", 1))
	var warned []time.Duration
	var cs []rankCycle
	for at := time.Duration(0); ; at += 30 * time.Second {
		l.now = t0.Add(at)
		cs = l.cycle()
		if cs[0].err != nil {
			if at < cfg.OpTimeout {
				t.Fatalf("stopped at %v, before OpTimeout: %v", at, cs[0].err)
			}
			break
		}
		if at > cfg.OpTimeout+time.Minute {
			t.Fatalf("still waiting at %v", at)
		}
		if n := cs[0].inspected; n != nil && n.level == slog.LevelWarn {
			warned = append(warned, at)
		}
	}
	if want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}; !slices.Equal(warned, want) {
		t.Fatalf("warnings at %v, want at %v", warned, want)
	}
	for r, c := range cs {
		if !errors.Is(c.err, ErrStall) || !errors.Is(c.err, collective.ErrTimeout) || c.abort ||
			!strings.Contains(c.err.Error(), "operation timeout 10m0s") ||
			!strings.Contains(c.err.Error(), "a (submitted by rank 0), b (submitted by rank 1); missing ranks: rank 0: [b]; rank 1: [a]") {
			t.Fatalf("rank %d: %v (abort %v)", r, c.err, c.abort)
		}
	}
	checkStallNote(t, cs, slog.LevelError, "shutting down")
}
