package dashboard

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// plantedSecret is what a job's secret would look like; nothing the
// server writes may hold it (see TestNothingSecretShown).
const plantedSecret = "gorovod-secret-5f1b8c9e2d7a4410"

// fakeSource is a metrics.Source for tests: a Snapshot that grows with
// Add, and subscribers with small buffers that, like the real Store's,
// get Resync when they fell behind instead of making Add wait.
type fakeSource struct {
	mu     sync.Mutex
	snap   metrics.Snapshot
	secret string // beside the job's label, never in a Snapshot
	subs   map[int]*fakeSub
	next   int
	closed bool
	adds   int
}

type fakeSub struct {
	ch     chan metrics.Update
	behind bool
}

func newFakeSource(job string) *fakeSource {
	return &fakeSource{
		snap:   metrics.Snapshot{Job: job, Start: time.Now()},
		secret: plantedSecret,
		subs:   map[int]*fakeSub{},
	}
}

func (f *fakeSource) Snapshot() metrics.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.Ranks = make([]metrics.RankInfo, len(f.snap.Ranks))
	for i, r := range f.snap.Ranks {
		lb := make(map[int]float64, len(r.LinkBytes))
		for k, v := range r.LinkBytes {
			lb[k] = v
		}
		r.LinkBytes = lb
		s.Ranks[i] = r
	}
	s.Series = make([]metrics.Series, len(f.snap.Series))
	for i, x := range f.snap.Series {
		x.Steps = append([]int64(nil), x.Steps...)
		x.Values = append([]float64(nil), x.Values...)
		s.Series[i] = x
	}
	s.Events = append([]metrics.Event(nil), f.snap.Events...)
	return s
}

func (f *fakeSource) Subscribe() (<-chan metrics.Update, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan metrics.Update, 8)
	if f.closed {
		close(ch)
		return ch, func() {}
	}
	id := f.next
	f.next++
	f.subs[id] = &fakeSub{ch: ch}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if s, ok := f.subs[id]; ok {
			close(s.ch)
			delete(f.subs, id)
		}
	}
}

// Add records u in the snapshot and offers it to every subscriber
// without waiting.
func (f *fakeSource) Add(u metrics.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds++
	for _, p := range u.Points {
		found := false
		for i := range f.snap.Series {
			s := &f.snap.Series[i]
			if s.Rank == p.Rank && s.Kind == p.Kind && s.Name == p.Name {
				s.Steps = append(s.Steps, p.Step)
				s.Values = append(s.Values, p.Value)
				found = true
				break
			}
		}
		if !found {
			f.snap.Series = append(f.snap.Series, metrics.Series{Rank: p.Rank, Kind: p.Kind, Name: p.Name, Steps: []int64{p.Step}, Values: []float64{p.Value}})
		}
	}
	for _, r := range u.Ranks {
		found := false
		for i := range f.snap.Ranks {
			if f.snap.Ranks[i].Rank == r.Rank {
				f.snap.Ranks[i], found = r, true
			}
		}
		if !found {
			f.snap.Ranks = append(f.snap.Ranks, r)
		}
	}
	f.snap.Events = append(f.snap.Events, u.Events...)
	if u.Ended {
		f.snap.Ended = true
	}
	for _, s := range f.subs {
		if s.behind {
			select {
			case s.ch <- metrics.Update{Resync: true, Ended: f.snap.Ended}:
				s.behind = false
			default:
			}
			continue
		}
		select {
		case s.ch <- u:
		default:
			s.behind = true
		}
	}
}

// Close closes every subscriber's channel, as the Store does when gorun
// is done with it.
func (f *fakeSource) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for id, s := range f.subs {
		close(s.ch)
		delete(f.subs, id)
	}
}

func (f *fakeSource) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// step is one training step of a fake job of n ranks: its scalars, its
// runtime series and its ranks' rows; an event every tenth step.
func step(n int, k int64) metrics.Update {
	var u metrics.Update
	now := time.Now()
	for r := 0; r < n; r++ {
		host := fmt.Sprintf("node%d", r/2)
		stepSec := 0.05 + 0.01*float64(r) + 0.005*math.Sin(float64(k))
		add := func(kind metrics.Kind, name string, v float64) {
			u.Points = append(u.Points, metrics.Point{Rank: r, Host: host, Step: k, Time: now, Kind: kind, Name: name, Value: v})
		}
		add(metrics.Scalar, "loss", 2.5*math.Exp(-float64(k)/40)+0.01*float64(r))
		add(metrics.Scalar, "accuracy", 1-math.Exp(-float64(k)/30))
		add(metrics.Runtime, "hvd/step_seconds", stepSec)
		add(metrics.Runtime, "hvd/allreduce_bytes", float64(k)*float64(4<<20))
		add(metrics.Runtime, "hvd/busbw_gbps", 8+math.Cos(float64(k)/5))
		lb := map[int]float64{}
		for p := 0; p < n; p++ {
			if p != r {
				lb[p] = float64(k) * float64(1+(r+p)%3) * float64(1<<20)
			}
		}
		u.Ranks = append(u.Ranks, metrics.RankInfo{Rank: r, Host: host, State: "running", Step: k, StepSeconds: stepSec, CommShare: 0.3, LinkBytes: lb})
	}
	if k%10 == 0 {
		u.Events = append(u.Events, metrics.Event{Time: now, Rank: -1, Kind: "started", Text: fmt.Sprintf("step %d reached", k)})
	}
	return u
}

// feed adds a step of n ranks every period until ctx is done, from step
// from on; it returns the next step.
func feed(ctx context.Context, f *fakeSource, n int, from int64, period time.Duration) int64 {
	t := time.NewTicker(period)
	defer t.Stop()
	k := from
	for {
		select {
		case <-ctx.Done():
			return k
		case <-t.C:
			f.Add(step(n, k))
			k++
		}
	}
}
