package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// TestNoAnswerError pins the error's wording and what it wraps.
func TestNoAnswerError(t *testing.T) {
	err := &NoAnswerError{Op: opNegotiation, Rank: 0, Silent: []int{1}, Limit: 2 * time.Second,
		Pending: []string{"a", "b"}, More: 3, Err: collective.ErrTimeout}
	want := "engine: negotiation on rank 0: no answer from rank 1 within 2s; pending here: [a b ... 3 more]: collective: timeout"
	if err.Error() != want || !errors.Is(err, collective.ErrTimeout) {
		t.Fatalf("got %q", err)
	}
	both := &NoAnswerError{Op: opNegotiation, Rank: 2, Silent: []int{0, 1}, Gone: []int{3}, Limit: time.Second, Err: ErrStall}
	if got := both.Error(); !strings.HasPrefix(got, "engine: negotiation on rank 2: no answer from ranks [0 1] within 1s; rank 3 left (link broken); likely causes:") ||
		!errors.Is(both, ErrStall) {
		t.Fatalf("got %q", got)
	}
	gone := &NoAnswerError{Op: opNegotiation, Rank: 1, Gone: []int{0}, Err: collective.ErrPeerGone}
	if got := gone.Error(); got != "engine: negotiation on rank 1: rank 0 left (link broken): "+collective.ErrPeerGone.Error() {
		t.Fatalf("got %q", got)
	}
}

// TestAnswerLimit: OpTimeout bounds the exchange unless the stall shutdown
// time is shorter; then a silent rank is a stall.
func TestAnswerLimit(t *testing.T) {
	for _, c := range []struct {
		op, stall, want time.Duration
		err             error
	}{
		{0, 0, 0, nil},
		{time.Second, 0, time.Second, collective.ErrTimeout},
		{0, time.Minute, time.Minute, ErrStall},
		{time.Second, time.Minute, time.Second, collective.ErrTimeout},
		{time.Minute, time.Second, time.Second, ErrStall},
		{time.Second, time.Second, time.Second, collective.ErrTimeout},
	} {
		if got, err := answerLimit(c.op, c.stall); got != c.want || err != c.err {
			t.Errorf("op %v stall %v: %v %v, want %v %v", c.op, c.stall, got, err, c.want, c.err)
		}
	}
}
