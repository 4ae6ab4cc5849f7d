package metrics

import (
	"sync"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// AddRankPoints adds the points that rank sent gorun (the rendezvous
// server's OnMetrics): its scalars and runtime series as Points, and its
// events (points with a Text, such as the engine's stall warnings) to
// the event log, in the order they came.
func (s *Store) AddRankPoints(rank int, pts []rendezvous.MetricPoint) {
	buf := pointBufs.Get().(*[]Point)
	out := (*buf)[:0]
	for _, p := range pts {
		if p.Text != "" {
			s.Add(out)
			out = out[:0]
			s.AddEvent(Event{Time: time.Unix(0, p.Time), Rank: rank, Kind: p.Name, Text: p.Text})
			continue
		}
		kind := Scalar
		if p.Runtime {
			kind = Runtime
		}
		out = append(out, Point{Rank: rank, Step: p.Step, Time: time.Unix(0, p.Time), Kind: kind, Name: p.Name, Value: p.Value})
	}
	s.Add(out)
	clear(out) // drop the strings it holds
	*buf = out[:0]
	pointBufs.Put(buf)
}

// pointBufs holds AddRankPoints' slices between calls (Add copies what
// it keeps).
var pointBufs = sync.Pool{New: func() any { return new([]Point) }}
