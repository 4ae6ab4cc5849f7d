package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTimelineWriter: the output is a JSON array even when empty, rows are
// announced once, and a write error stops the timeline.
func TestTimelineWriter(t *testing.T) {
	var buf bytes.Buffer
	tl := newTimeline(&buf, t0)
	if err := tl.close(); err != nil {
		t.Fatal(err)
	}
	var evs []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &evs); err != nil || len(evs) != 1 {
		t.Fatalf("empty timeline: %v %s", err, buf.String())
	}
	buf.Reset()
	tl = newTimeline(&buf, t0)
	tl.span("a", tlQueue, t0.Add(time.Millisecond), t0.Add(2*time.Millisecond))
	tl.span("a", tlCollective+"ALLREDUCE", t0.Add(2*time.Millisecond), t0.Add(3*time.Millisecond))
	tl.negotiation(&response{name: "b", req: ar("b", 1), seen: []time.Time{t0.Add(5 * time.Millisecond), {}, t0}}, t0, t0.Add(6*time.Millisecond))
	if err := tl.close(); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &evs); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := "M process_name, M process_sort_index, B QUEUE 1000, E 2000, B RING_ALLREDUCE 2000, E 3000, " +
		"M process_name, M process_sort_index, B NEGOTIATE_ALLREDUCE 0, i 2 0, i 0 5000, E 6000"
	var got []string
	for _, ev := range evs {
		s := fmt.Sprint(ev["ph"], " ", ev["name"])
		if ev["ph"] == "E" {
			s = "E"
		}
		if ev["ph"] != "M" {
			s += fmt.Sprint(" ", ev["ts"])
		}
		got = append(got, s)
	}
	if strings.Join(got, ", ") != want {
		t.Fatalf("events:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
	bad := newTimeline(failWriter{}, t0)
	bad.span("a", tlQueue, t0, t0)
	if err := bad.close(); err == nil {
		t.Fatal("a failed write went unreported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
