package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStallInspector drives the inspector with an injected clock.
func TestStallInspector(t *testing.T) {
	tb := newTable(4)
	tb.add(0, ar("a", 1), t0)
	tb.add(1, ar("a", 1), t0.Add(time.Second))
	tb.add(3, ar("b", 1), t0.Add(10*time.Second))
	for i := range 8 {
		tb.add(2, ar(fmt.Sprint("c", i), 1), t0)
	}
	joined := []bool{false, false, false, true}
	s := stallInspector{warn: 60 * time.Second, shutdown: 120 * time.Second}

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
	if rep := s.check(t0.Add(100*time.Second), tb.waiting(), joined); rep == nil || rep.warn {
		t.Fatalf("warned again within the warning interval: %+v", rep)
	}
	rep = s.check(t0.Add(130*time.Second), tb.waiting(), joined)
	if rep == nil || !rep.warn || !rep.shutdown || rep.oldest != 130*time.Second {
		t.Fatalf("at 130s: %+v", rep)
	}
	err := rep.err(s.shutdown)
	if !errors.Is(err, ErrStall) || !strings.Contains(err.Error(), "rank 2: [a b]") || strings.Contains(err.Error(), "rank 3") || !strings.Contains(err.Error(), "uneven data") {
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
