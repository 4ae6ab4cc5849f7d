package shmring

import (
	"runtime"
	"testing"
	"time"
)

// TestShareTurn: with a share of 0 every look gives the process's other
// goroutines a turn; with a positive share only a look at least that long
// after the last turn does (the first look always does).
func TestShareTurn(t *testing.T) {
	t0 := time.Unix(100, 0)
	var last time.Time
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		ShareTurn(0, &last, now)
		if !last.Equal(now) {
			t.Fatalf("share 0, look %d: the last turn is %v, want this look's %v", i, last, now)
		}
	}
	last = time.Time{}
	for _, c := range []struct {
		after time.Duration
		turn  time.Duration // when the last turn is after the look
	}{{0, 0}, {5 * time.Microsecond, 0}, {19 * time.Microsecond, 0}, {20 * time.Microsecond, 20 * time.Microsecond}, {39 * time.Microsecond, 20 * time.Microsecond}, {41 * time.Microsecond, 41 * time.Microsecond}} {
		ShareTurn(20*time.Microsecond, &last, t0.Add(c.after))
		if want := t0.Add(c.turn); !last.Equal(want) {
			t.Fatalf("share 20µs, a look %v after the first: the last turn is %v after it, want %v", c.after, last.Sub(t0), c.turn)
		}
	}
}

// TestShareEvery: polls share every look with one processor and every
// shareEvery with more.
func TestShareEvery(t *testing.T) {
	for _, c := range []struct {
		procs int
		want  time.Duration
	}{{1, 0}, {2, shareEvery}, {3, shareEvery}} {
		prev := runtime.GOMAXPROCS(c.procs)
		got := ShareEvery()
		runtime.GOMAXPROCS(prev)
		if got != c.want {
			t.Errorf("GOMAXPROCS %d: ShareEvery() = %v, want %v", c.procs, got, c.want)
		}
	}
}
