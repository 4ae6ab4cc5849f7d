package dashboard

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// TestNonLoopbackNeedsToken: a server on every interface (0.0.0.0, as
// gorun --dashboard 0.0.0.0:8265 asks) makes a token without being asked
// and answers 401 to every path without it, whatever Host the client
// names; with it, 200.
func TestNonLoopbackNeedsToken(t *testing.T) {
	f := newFakeSource("open")
	f.Add(step(2, 1))
	s := serve(t, Config{Source: f, Addr: "0.0.0.0:0"})
	tok := s.Token()
	if len(tok) != 64 || !strings.Contains(s.URL(), "?token="+tok) {
		t.Fatalf("token %q, URL %s: want a new token in the URL", tok, s.URL())
	}
	at := "http://127.0.0.1:" + strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
	for _, p := range []string{"/", "/api/snapshot", "/events", "/metrics"} {
		for _, host := range []string{"", "node1:8265", "127.0.0.1"} {
			hdr := []string{}
			if host != "" {
				hdr = []string{"Host", host}
			}
			if resp, body := get(t, at+p, hdr...); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "gorovod_") || strings.Contains(body, `"ranks"`) {
				t.Errorf("GET %s (Host %q) without the token: %d %.100q", p, host, resp.StatusCode, body)
			}
		}
	}
	if resp, body := get(t, at+"/metrics", "Authorization", "Bearer "+tok, "Host", "node1:8265"); resp.StatusCode != 200 || !strings.Contains(body, "gorovod_loss") {
		t.Errorf("GET /metrics with the token: %d", resp.StatusCode)
	}
}

// TestNoEnvironmentShown: nothing of the process's environment (a
// planted variable beside the secret) shows on the page, the snapshot,
// /metrics or the summary, with a real Store as the source.
func TestNoEnvironmentShown(t *testing.T) {
	const planted = "planted-env-value-7d1e"
	t.Setenv("GOROVOD_PLANTED", planted)
	t.Setenv("GOROVOD_SECRET", plantedSecret)
	st := metrics.NewStore(metrics.Config{Job: "train -np 2"})
	st.SetRank(0, "node1", "running")
	st.Add([]metrics.Point{{Rank: 0, Step: 1, Kind: metrics.Scalar, Name: "loss", Value: 1}})
	st.AddEvent(metrics.Event{Rank: 0, Kind: "stall", Text: "engine: stalled tensors"})
	s := serve(t, Config{Source: st})
	var all strings.Builder
	for _, p := range []string{"/", "/api/snapshot", "/metrics"} {
		resp, body := get(t, base(s)+p)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
		all.WriteString(body)
	}
	if err := WriteSummarySVG(&all, st.Snapshot()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{planted, "GOROVOD_PLANTED", plantedSecret, "GOROVOD_SECRET"} {
		if strings.Contains(all.String(), bad) {
			t.Errorf("%q shows", bad)
		}
	}
	if !strings.Contains(all.String(), "train -np 2") || !strings.Contains(all.String(), "stalled tensors") {
		t.Error("the job's label or its event does not show: the check above checks nothing")
	}
}

// TestCrowdDoesNotHoldTheStore: while a thousand connections are open to
// the dashboard of a real Store, 50 of them reading the snapshot, /metrics
// and the event stream as fast as they can, the job's side of the Store
// (Add, AddEvent, as the rendezvous calls them) goes on: every point
// arrives. The slowest Add is logged for comparison with the quiet run
// before (no bound is asserted: the machine may be loaded).
func TestCrowdDoesNotHoldTheStore(t *testing.T) {
	st := metrics.NewStore(metrics.Config{Job: "crowd"})
	defer st.Close()
	s := serve(t, Config{Source: st, MaxConns: 2048, MaxStreams: 2048})
	const batches = 1000
	addAll := func(from int) time.Duration {
		var slowest time.Duration
		for i := range batches {
			pts := make([]metrics.Point, 0, 8)
			for r := range 4 {
				pts = append(pts, metrics.Point{Rank: r, Step: int64(from + i), Kind: metrics.Scalar, Name: "loss", Value: float64(i)},
					metrics.Point{Rank: r, Step: int64(from + i), Kind: metrics.Runtime, Name: "hvd/step", Value: float64(from + i)})
			}
			start := time.Now()
			st.Add(pts)
			if i%100 == 0 {
				st.AddEvent(metrics.Event{Rank: -1, Kind: "stall", Text: "x"})
			}
			slowest = max(slowest, time.Since(start))
		}
		return slowest
	}
	quiet := addAll(0)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 950 { // idle
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 50 { // busy
		wg.Go(func() {
			paths := []string{"/api/snapshot", "/metrics", "/"}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(base(s) + paths[i%len(paths)])
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				reads.Add(1)
			}
		})
	}
	streams := make([]*sseReader, 0, 20)
	for range 20 { // streams that read nothing
		streams = append(streams, openEvents(t, s))
	}
	busy := addAll(batches)
	close(stop)
	wg.Wait()
	t.Logf("slowest Add: %v quiet, %v with %d connections open (%d reads, %d streams)", quiet, busy, len(conns)+50+len(streams), reads.Load(), len(streams))
	if got := st.Accepted(); got != 2*batches*8 {
		t.Errorf("the Store accepted %d points, want %d", got, 2*batches*8)
	}
	snap := st.Snapshot()
	for _, r := range snap.Ranks {
		if r.Step != 2*batches-1 {
			t.Errorf("rank %d at step %d, want %d", r.Rank, r.Step, 2*batches-1)
		}
	}
	if reads.Load() == 0 {
		t.Error("no read answered in the crowd: the check above checks nothing")
	}
}
