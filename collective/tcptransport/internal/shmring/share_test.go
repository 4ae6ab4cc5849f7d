package shmring

import (
	"runtime"
	"testing"
	"time"
)

// TestShareTurn: with a share of 0 every look gives the process's other
// goroutines a turn; with a positive share the first look starts the
// clock without one, and only a look at least that long after the last
// turn (or the first look) gives one.
func TestShareTurn(t *testing.T) {
	turns := 0
	prev := gosched
	gosched = func() { turns++ }
	defer func() { gosched = prev }()
	t0 := time.Unix(100, 0)
	var last time.Time
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		ShareTurn(0, &last, now)
		if !last.Equal(now) || turns != i+1 {
			t.Fatalf("share 0, look %d: the last turn is %v after %d turns, want this look's %v after %d", i, last, turns, now, i+1)
		}
	}
	last, turns = time.Time{}, 0
	for _, c := range []struct {
		after time.Duration
		turn  time.Duration // when the last turn (or the first look) is after the first look
		turns int           // the turns given so far
	}{{0, 0, 0}, {5 * time.Microsecond, 0, 0}, {19 * time.Microsecond, 0, 0}, {20 * time.Microsecond, 20 * time.Microsecond, 1}, {39 * time.Microsecond, 20 * time.Microsecond, 1}, {41 * time.Microsecond, 41 * time.Microsecond, 2}} {
		ShareTurn(20*time.Microsecond, &last, t0.Add(c.after))
		if want := t0.Add(c.turn); !last.Equal(want) || turns != c.turns {
			t.Fatalf("share 20µs, a look %v after the first: the last turn is %v after it with %d turns, want %v with %d", c.after, last.Sub(t0), turns, c.turn, c.turns)
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
