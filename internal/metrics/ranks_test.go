package metrics

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// TestAddRankPoints: batches of 8 ranks' points, sent concurrently (each
// batch with an event in its middle), reach their series complete and in
// order, the events the event log, and a subscriber that joins half-way
// gets exactly the points added after it joined, with the values they
// were sent with (the Store reuses its buffers while nobody subscribes,
// and AddRankPoints its own between calls).
func TestAddRankPoints(t *testing.T) {
	const ranks, batches, per = 8, 40, 50
	st := NewStore(Config{MaxPoints: batches * per})
	defer st.Close()
	var wg sync.WaitGroup
	var sub <-chan Update
	var cancel func()
	subscribed := make(chan struct{})
	for r := range ranks {
		wg.Go(func() {
			for k := range batches {
				if r == 0 && k == batches/2 {
					sub, cancel = st.Subscribe()
					close(subscribed)
				}
				pts := make([]rendezvous.MetricPoint, 0, per+1)
				for i := range per {
					step := int64(k*per + i)
					pts = append(pts, rendezvous.MetricPoint{Step: step, Time: time.Now().UnixNano(), Name: "loss", Value: float64(r*1_000_000) + float64(step)})
					if i == per/2 {
						pts = append(pts, rendezvous.MetricPoint{Step: step, Name: "stall", Text: fmt.Sprintf("rank %d batch %d", r, k)})
					}
				}
				st.AddRankPoints(r, pts)
			}
		})
	}
	wg.Wait()
	<-subscribed
	defer cancel()
	snap := st.Snapshot()
	got := 0
	for _, s := range snap.Series {
		if s.Name != "loss" || s.Kind != Scalar {
			t.Fatalf("series %q of kind %q", s.Name, s.Kind)
		}
		got++
		if len(s.Values) != batches*per {
			t.Fatalf("rank %d: %d points, want %d", s.Rank, len(s.Values), batches*per)
		}
		for i, v := range s.Values {
			if s.Steps[i] != int64(i) || v != float64(s.Rank*1_000_000+i) {
				t.Fatalf("rank %d point %d: step %d value %v", s.Rank, i, s.Steps[i], v)
			}
		}
	}
	if got != ranks || len(snap.Events) != ranks*batches {
		t.Fatalf("%d series, %d events; want %d and %d", got, len(snap.Events), ranks, ranks*batches)
	}
	seen := 0
	last := map[int]int64{} // by rank, the step of its last point seen
	for len(sub) > 0 {
		u := <-sub
		for _, p := range u.Points {
			prev, ok := last[p.Rank]
			if p.Value != float64(p.Rank*1_000_000)+float64(p.Step) || p.Time.IsZero() || ok && p.Step != prev+1 {
				t.Fatalf("subscriber got %+v after step %d (%t)", p, prev, ok)
			}
			last[p.Rank] = p.Step
			seen++
		}
	}
	if seen == 0 || seen > ranks*batches*per {
		t.Fatalf("subscriber saw %d points", seen)
	}
}
