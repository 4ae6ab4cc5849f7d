package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Timeline activity names (the B/E spans of one tensor's row).
const (
	tlQueue      = "QUEUE"      // ready, waiting for its batch
	tlNegotiate  = "NEGOTIATE_" // + kind, from submission to ready
	tlCollective = "RING_"      // + kind, the data-plane operation
)

// traceEvent is one event of the Chrome trace event format, which
// chrome://tracing and Perfetto (ui.perfetto.dev) open.
type traceEvent struct {
	Name  string         `json:"name"`
	Phase string         `json:"ph"` // B begin, E end, i instant, M metadata
	TS    float64        `json:"ts"` // microseconds since the timeline began
	PID   int            `json:"pid"`
	TID   int            `json:"tid"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// timeline writes a JSON array of trace events in which every tensor name
// is a "process" (a row), as Horovod's timeline does. Only rank 0 writes
// one. A write error stops the timeline and is reported by close.
type timeline struct {
	w     *bufio.Writer
	start time.Time
	pids  map[string]int
	n     int
	err   error
}

func newTimeline(w io.Writer, start time.Time) *timeline {
	return &timeline{w: bufio.NewWriterSize(w, 64<<10), start: start, pids: map[string]int{}}
}

func (t *timeline) write(ev traceEvent) {
	if t.err != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.err = err
		return
	}
	sep := ",\n"
	if t.n == 0 {
		sep = "[\n"
	}
	t.n++
	if _, err := t.w.WriteString(sep); err != nil {
		t.err = err
		return
	}
	_, t.err = t.w.Write(b)
}

// pid returns the row of a tensor, announcing it on first use.
func (t *timeline) pid(name string) int {
	if p, ok := t.pids[name]; ok {
		return p
	}
	p := len(t.pids) + 1
	t.pids[name] = p
	t.write(traceEvent{Name: "process_name", Phase: "M", PID: p, Args: map[string]any{"name": name}})
	t.write(traceEvent{Name: "process_sort_index", Phase: "M", PID: p, Args: map[string]any{"sort_index": p}})
	return p
}

// ts is the time of an event in microseconds since the timeline began;
// estimates of other ranks' times that fall before that count as 0.
func (t *timeline) ts(at time.Time) float64 {
	return float64(max(at.Sub(t.start), 0).Nanoseconds()) / 1e3
}

// begin opens a span named activity on tensor's row.
func (t *timeline) begin(tensor, activity string, at time.Time) {
	t.write(traceEvent{Name: activity, Phase: "B", TS: t.ts(at), PID: t.pid(tensor)})
}

// end closes the innermost open span on tensor's row.
func (t *timeline) end(tensor string, at time.Time, args map[string]any) {
	t.write(traceEvent{Phase: "E", TS: t.ts(at), PID: t.pid(tensor), Args: args})
}

// span writes a whole span.
func (t *timeline) span(tensor, activity string, from, to time.Time) {
	t.begin(tensor, activity, from)
	t.end(tensor, to, nil)
}

// negotiation writes the NEGOTIATE_<KIND> span of a response, with an
// instant event per rank, in time order, when its request arrived (when
// known).
func (t *timeline) negotiation(r *response, from, to time.Time) {
	t.begin(r.name, tlNegotiate+strings.ToUpper(r.req.Kind.String()), from)
	ranks := make([]int, 0, len(r.seen))
	for rank, at := range r.seen {
		if !at.IsZero() {
			ranks = append(ranks, rank)
		}
	}
	slices.SortStableFunc(ranks, func(a, b int) int { return r.seen[a].Compare(r.seen[b]) })
	for _, rank := range ranks {
		at := r.seen[rank]
		if at.Before(from) {
			at = from
		}
		if at.After(to) {
			at = to
		}
		t.write(traceEvent{Name: fmt.Sprint(rank), Phase: "i", Scope: "t", TS: t.ts(at), PID: t.pid(r.name),
			Args: map[string]any{"rank": rank}})
	}
	t.end(r.name, to, nil)
}

// close ends the JSON array and flushes; it does not close the writer.
func (t *timeline) close() error {
	if t.n == 0 {
		t.write(traceEvent{Name: "timeline", Phase: "M", Args: map[string]any{"name": "gorovod"}})
	}
	if t.err == nil {
		_, t.err = t.w.WriteString("\n]\n")
	}
	if t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}
