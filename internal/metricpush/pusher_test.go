package metricpush

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// server starts a rendezvous server with onMetrics (nil: none) and
// returns a client of it.
func server(t *testing.T, onMetrics func(int, []rendezvous.MetricPoint)) *rendezvous.Client {
	t.Helper()
	secret := make([]byte, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1, Hosts: []string{""}, OnMetrics: onMetrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rendezvous.Dial(ctx, srv.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPusherSends: logged scalars and added points reach OnMetrics under
// the Pusher's rank by Close, with their steps and kinds.
func TestPusherSends(t *testing.T) {
	var mu sync.Mutex
	got := map[string]rendezvous.MetricPoint{}
	ranks := map[int]bool{}
	c := server(t, func(rank int, pts []rendezvous.MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		ranks[rank] = true
		for _, p := range pts {
			got[p.Name] = p
		}
	})
	p := New(c, 3, nil)
	p.Log(7, map[string]float64{"eval/loss": 0.25})
	p.Add(rendezvous.MetricPoint{Step: 8, Name: "ps/pushes", Value: 2, Runtime: true})
	p.Close()
	p.Close() // a second Close does nothing
	mu.Lock()
	defer mu.Unlock()
	if l := got["eval/loss"]; l.Step != 7 || l.Value != 0.25 || l.Runtime || l.Time == 0 {
		t.Errorf("eval/loss %+v", l)
	}
	if q := got["ps/pushes"]; q.Step != 8 || q.Value != 2 || !q.Runtime || q.Time == 0 {
		t.Errorf("ps/pushes %+v", q)
	}
	if len(ranks) != 1 || !ranks[3] || p.Dropped() != 0 {
		t.Errorf("ranks %v, dropped %d", ranks, p.Dropped())
	}
}

// TestPusherDrops: without a client, or with a server that takes no
// metrics, points are dropped and counted and nothing blocks; a nil
// Pusher does nothing.
func TestPusherDrops(t *testing.T) {
	p := New(nil, 0, nil)
	p.Log(1, map[string]float64{"a": 1, "b": 2})
	p.Close()
	if p.Dropped() != 2 {
		t.Errorf("no client: dropped %d, want 2", p.Dropped())
	}
	q := New(server(t, nil), 0, nil)
	for i := range int64(3 * Buffer) {
		q.Log(i, map[string]float64{"a": 1})
	}
	q.Close()
	if q.Dropped() != 3*Buffer {
		t.Errorf("no receiver: dropped %d, want %d", q.Dropped(), 3*Buffer)
	}
	var n *Pusher
	n.Log(1, map[string]float64{"a": 1})
	n.Add(rendezvous.MetricPoint{Name: "a"})
	n.Close()
	if n.Dropped() != 0 {
		t.Error("a nil Pusher counted")
	}
}
