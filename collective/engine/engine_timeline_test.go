package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

type traceEvent struct {
	Name  string         `json:"name"`
	Phase string         `json:"ph"`
	TS    float64        `json:"ts"`
	PID   int            `json:"pid"`
	Args  map[string]any `json:"args"`
	Scope string         `json:"s"`
}

// TestEngineTimeline: rank 0's timeline is a JSON array of Chrome trace
// events with one row per tensor: negotiation (with each rank's arrival),
// queueing, fusion copies and the collective, closed with dtype and shape.
func TestEngineTimeline(t *testing.T) {
	const n = 2
	var tl bytes.Buffer
	cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
	es := make([]*engine.Engine, n)
	for r, c := range cs {
		cfg := testConfig()
		cfg.Timeline = &tl // only rank 0 writes
		es[r] = engine.New(c, cfg)
	}
	onEngines(t, es, func(r int, e *engine.Engine) error {
		hs := []*engine.Handle{
			e.Submit(engine.Request{Name: "w", Kind: engine.KindBroadcast, DType: kernels.F32, Shape: []int{2}}, make([]byte, 8)),
		}
		for i := range 3 {
			hs = append(hs, e.Submit(allreduceReq(fmt.Sprint("t", i), kernels.F32, kernels.Sum, 2, 2), make([]byte, 16)))
		}
		return waitAll(hs)
	})
	for _, e := range es {
		e.Shutdown()
	}
	var events []traceEvent
	if err := json.Unmarshal(tl.Bytes(), &events); err != nil {
		t.Fatalf("timeline is not a JSON array of events: %v\n%s", err, tl.String())
	}
	rows := traceRows(t, events)
	want := "B NEGOTIATE_ALLREDUCE, i, i, E, B ALLREDUCE, B QUEUE, E, " +
		"B RING_ALLREDUCE, E, E dtype=float32 shape=[2 2]"
	for i := range 3 {
		if got := rows[fmt.Sprint("t", i)]; got != want {
			t.Errorf("row t%d:\n got %s\nwant %s", i, got, want)
		}
	}
	wantW := "B NEGOTIATE_BROADCAST, i, i, E, B BROADCAST, B QUEUE, E, B RING_BROADCAST, E, E dtype=float32 shape=[2]"
	if got := rows["w"]; got != wantW {
		t.Errorf("row w:\n got %s\nwant %s", got, wantW)
	}
}

// traceRows checks that every row's spans nest and its times do not go
// backwards, and renders each row as "B NAME, i, E, ...".
func traceRows(t *testing.T, events []traceEvent) map[string]string {
	t.Helper()
	names := map[int]string{}
	rows := map[string][]string{}
	last := map[int]float64{}
	depth := map[int]int{}
	for _, ev := range events {
		switch ev.Phase {
		case "M":
			if ev.Name == "process_name" {
				names[ev.PID] = ev.Args["name"].(string)
			}
			continue
		case "B":
			depth[ev.PID]++
		case "E":
			if depth[ev.PID]--; depth[ev.PID] < 0 {
				t.Fatalf("unbalanced E on row %d", ev.PID)
			}
		}
		if ev.TS < last[ev.PID] {
			t.Fatalf("row %q goes back in time at %+v", names[ev.PID], ev)
		}
		last[ev.PID] = ev.TS
		s := ev.Phase + " " + ev.Name
		if ev.Phase == "i" {
			s = "i" // ranks arrive in any order; count them
		}
		if ev.Phase == "E" {
			s = "E"
			if ev.Args != nil {
				s += fmt.Sprintf(" dtype=%v shape=%v", ev.Args["dtype"], ev.Args["shape"])
			}
		}
		rows[names[ev.PID]] = append(rows[names[ev.PID]], s)
	}
	for pid, d := range depth {
		if d != 0 {
			t.Fatalf("row %q has %d open spans", names[pid], d)
		}
	}
	out := map[string]string{}
	for name, evs := range rows {
		out[name] = strings.Join(evs, ", ")
	}
	return out
}
