package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// TestStallInspector drives the inspector with an injected clock: a
// warning at the warning time, repeats at doubling intervals, and at the
// shutdown time a report without a warning whose error names the stalled
// tensors, the ranks that submitted them and the ranks missing them.
func TestStallInspector(t *testing.T) {
	tb := newTable(4)
	tb.add(0, ar("a", 1), t0)
	tb.add(1, ar("a", 1), t0.Add(time.Second))
	tb.add(3, ar("b", 1), t0.Add(10*time.Second))
	for i := range 8 {
		tb.add(2, ar(fmt.Sprint("c", i), 1), t0)
	}
	joined := []bool{false, false, false, true}
	s := newStallInspector(60*time.Second, 300*time.Second, 0)

	if rep := s.check(t0.Add(59*time.Second), tb.waiting(), joined); rep != nil {
		t.Fatalf("stalled before the warning time: %v", rep)
	}
	rep := s.check(t0.Add(65*time.Second), tb.waiting(), joined)
	if rep == nil || !rep.warn || rep.shutdown || rep.tensors != 9 {
		t.Fatalf("at 65s: %+v", rep)
	}
	want := "rank 0: [c0 c1 c2 c3 c4 c5 ... 2 more]; rank 1: [c0 c1 c2 c3 c4 c5 ... 2 more]; rank 2: [a]"
	if got := rep.ranks(); got != want { // b is younger; joined rank 3 is never missing
		t.Fatalf("missing:\n got %s\nwant %s", got, want)
	}
	for _, c := range []struct {
		at   time.Duration
		warn bool
	}{ // warnings 60 s, then 120 s, then 240 s apart
		{100 * time.Second, false}, {125 * time.Second, true}, {200 * time.Second, false}, {245 * time.Second, true},
		{299 * time.Second, false},
	} {
		if rep := s.check(t0.Add(c.at), tb.waiting(), joined); rep == nil || rep.warn != c.warn || rep.shutdown {
			t.Fatalf("at %v: %+v, want warn %v", c.at, rep, c.warn)
		}
	}
	rep = s.check(t0.Add(310*time.Second), tb.waiting(), joined)
	if rep == nil || rep.warn || !rep.shutdown || rep.oldest != 310*time.Second {
		t.Fatalf("at 310s: %+v, want the shutdown without a warning", rep)
	}
	err := rep.err(&s)
	if !errors.Is(err, ErrStall) || errors.Is(err, collective.ErrTimeout) || !strings.Contains(err.Error(), "stall of more than 5m0s") ||
		!strings.Contains(err.Error(), "rank 2: [a b]") || strings.Contains(err.Error(), "rank 3:") ||
		!strings.Contains(err.Error(), "a (submitted by ranks [0 1]), b (submitted by rank 3), c0 (submitted by rank 2)") ||
		!strings.Contains(err.Error(), "c3 (submitted by rank 2) ... 4 more;") || !strings.Contains(err.Error(), "uneven data") {
		t.Fatalf("error: %v", err)
	}
}

// TestStallRepeatCapAndReset: repeated warnings of one long stall are at
// most stallRepeatMax warning times apart, and a stall that clears warns
// afresh at the warning time when a new one starts.
func TestStallRepeatCapAndReset(t *testing.T) {
	tb := newTable(2)
	tb.add(0, ar("a", 1), t0)
	joined := make([]bool, 2)
	s := newStallInspector(time.Second, 0, 0)
	var warned []time.Duration
	for at := time.Second; at <= 100*time.Second; at += time.Second {
		if rep := s.check(t0.Add(at), tb.waiting(), joined); rep == nil || rep.shutdown {
			t.Fatalf("at %v: %+v", at, rep)
		} else if rep.warn {
			warned = append(warned, at)
		}
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 48, 64, 80, 96}
	if len(warned) != len(want) {
		t.Fatalf("warnings at %v, want at %v seconds", warned, want)
	}
	for i, w := range want {
		if warned[i] != w*time.Second {
			t.Fatalf("warnings at %v, want at %v seconds", warned, want)
		}
	}
	if rep := s.check(t0.Add(101*time.Second), nil, joined); rep != nil { // the stall cleared
		t.Fatalf("no names waiting: %+v", rep)
	}
	tb2 := newTable(2)
	tb2.add(1, ar("b", 1), t0.Add(200*time.Second))
	if rep := s.check(t0.Add(201*time.Second), tb2.waiting(), joined); rep == nil || !rep.warn {
		t.Fatalf("a new stall after one cleared: %+v, want a warning", rep)
	}
}

// TestStallShutdownByOpTimeout: OpTimeout ends a stall when the stall
// shutdown time is unset or longer, with ErrStall and ErrTimeout.
func TestStallShutdownByOpTimeout(t *testing.T) {
	for _, c := range []struct {
		shutdown, op, want time.Duration
		byOp               bool
	}{
		{0, 0, 0, false}, {0, 10, 10, true}, {20, 10, 10, true}, {10, 20, 10, false}, {10, 0, 10, false}, {10, 10, 10, true},
	} {
		s := newStallInspector(5, c.shutdown, c.op)
		if s.shutdown != c.want || s.byOp != c.byOp {
			t.Errorf("shutdown %d op %d: limit %d by OpTimeout %v, want %d, %v", c.shutdown, c.op, s.shutdown, s.byOp, c.want, c.byOp)
		}
	}
	tb := newTable(2)
	tb.add(0, ar("a", 1), t0)
	tb.add(1, ar("b", 1), t0)
	s := newStallInspector(time.Minute, 0, 15*time.Second)
	rep := s.check(t0.Add(16*time.Second), tb.waiting(), make([]bool, 2))
	if rep == nil || rep.warn || !rep.shutdown {
		t.Fatalf("after OpTimeout: %+v, want the shutdown", rep)
	}
	err := rep.err(&s)
	if !errors.Is(err, ErrStall) || !errors.Is(err, collective.ErrTimeout) || !strings.Contains(err.Error(), "operation timeout 15s") ||
		!strings.Contains(err.Error(), "a (submitted by rank 0), b (submitted by rank 1); missing ranks: rank 0: [b]; rank 1: [a]") {
		t.Fatalf("error: %v", err)
	}
}

func TestStallThresholds(t *testing.T) {
	for _, c := range []struct{ warn, shutdown, want time.Duration }{
		{0, 0, 0}, {60, 0, 60}, {0, 30, 30}, {60, 120, 60}, {60, 30, 30},
	} {
		s := stallInspector{warn: c.warn, shutdown: c.shutdown}
		if got := s.threshold(); got != c.want {
			t.Errorf("warn %d shutdown %d: threshold %d, want %d", c.warn, c.shutdown, got, c.want)
		}
	}
	tb := newTable(2)
	tb.add(0, ar("a", 1), t0)
	off := stallInspector{}
	if rep := off.check(t0.Add(time.Hour), tb.waiting(), make([]bool, 2)); rep != nil {
		t.Fatalf("disabled inspector reported %v", rep)
	}
	quiet := stallInspector{shutdown: time.Minute} // no warnings, only the shutdown
	if rep := quiet.check(t0.Add(2*time.Minute), tb.waiting(), make([]bool, 2)); rep == nil || rep.warn || !rep.shutdown {
		t.Fatalf("shutdown-only inspector: %+v", rep)
	}
}
