package tcptransport

import (
	"errors"
	"testing"
	"time"
)

// TestRejectLogSummarisesPerHostAndPeriod drives a rejectLog with a fake
// clock: the first rejection of each host is a Warn line, later ones are
// Debug lines counted in a Warn summary at most once per rejectEvery and
// once more on flush, which says nothing about hosts with nothing new.
func TestRejectLogSummarisesPerHostAndPeriod(t *testing.T) {
	var logs logBuffer
	now := time.Unix(1000, 0)
	l := newRejectLog(logs.logger(), func() time.Time { return now })
	junk := errors.New("bad magic")
	warns := func() int { return len(logs.lines("level=WARN")) }

	l.reject("10.0.0.1:1000", junk)
	for range 3 {
		now = now.Add(time.Second)
		l.reject("10.0.0.1:1001", junk)
	}
	if warns() != 1 || len(logs.lines("level=DEBUG", "remote=10.0.0.1:1001")) != 3 {
		t.Fatalf("after 4 rejections from one host within %v: want 1 Warn and 3 Debug lines; log:\n%s", rejectEvery, logs.lines())
	}
	now = now.Add(rejectEvery)
	l.reject("10.0.0.1:1002", junk) // the period has passed: summarise
	l.reject("10.0.0.2:2000", junk) // another host: its own first Warn
	l.reject("10.0.0.1:1003", junk)
	if len(logs.lines("level=WARN", "rejected more connections", "host=10.0.0.1", "count=4 ", "over=13s", "last_remote=10.0.0.1:1002")) != 1 ||
		len(logs.lines("level=WARN", "rejected connection", "remote=10.0.0.2:2000")) != 1 || warns() != 3 {
		t.Fatalf("want a summary of 4 from 10.0.0.1 and a first Warn for 10.0.0.2; log:\n%s", logs.lines())
	}
	l.flush()
	l.flush() // nothing new: silent
	if len(logs.lines("level=WARN", "rejected more connections", "host=10.0.0.1", "count=1 ", "last_remote=10.0.0.1:1003")) != 1 || warns() != 4 {
		t.Fatalf("flush: want one summary of the last rejection from 10.0.0.1 and nothing for 10.0.0.2; log:\n%s", logs.lines())
	}
}
