package metrics

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// seriesOf returns rank's series name from a snapshot.
func seriesOf(t *testing.T, snap Snapshot, rank int, name string) Series {
	t.Helper()
	for _, s := range snap.Series {
		if s.Rank == rank && s.Name == name {
			return s
		}
	}
	t.Fatalf("no series %q of rank %d", name, rank)
	return Series{}
}

func TestThinningKeepsFirstLastAndBounds(t *testing.T) {
	const limit = 64
	s := NewStore(Config{MaxPoints: limit})
	for n := int64(1); n <= 5000; n++ {
		s.Add([]Point{{Rank: 0, Step: n, Kind: Scalar, Name: "loss", Value: float64(n)}})
		sr := seriesOf(t, s.Snapshot(), 0, "loss")
		if len(sr.Steps) > limit || len(sr.Steps) != len(sr.Values) {
			t.Fatalf("after %d points: %d steps, %d values, limit %d", n, len(sr.Steps), len(sr.Values), limit)
		}
		if sr.Steps[0] != 1 || sr.Steps[len(sr.Steps)-1] != n {
			t.Fatalf("after %d points: first %d, last %d", n, sr.Steps[0], sr.Steps[len(sr.Steps)-1])
		}
		for i := 1; i < len(sr.Steps); i++ {
			if sr.Steps[i] <= sr.Steps[i-1] {
				t.Fatalf("after %d points: steps not increasing: %v", n, sr.Steps)
			}
		}
	}
	// Evenly thinned: every gap but the last is the same stride.
	sr := seriesOf(t, s.Snapshot(), 0, "loss")
	if len(sr.Steps) < limit/2 {
		t.Errorf("only %d points kept of %d allowed", len(sr.Steps), limit)
	}
	stride := sr.Steps[1] - sr.Steps[0]
	for i := 1; i < len(sr.Steps)-1; i++ {
		if d := sr.Steps[i] - sr.Steps[i-1]; d != stride {
			t.Fatalf("gap %d at %d, want the stride %d: %v", d, i, stride, sr.Steps)
		}
	}
}

func TestFloodStaysBounded(t *testing.T) {
	s := NewStore(Config{MaxPoints: 128, MaxSeries: 8, MaxEvents: 10})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	batch := make([]Point, 1000)
	const total = 1_000_000
	for n := 0; n < total; n += len(batch) {
		for i := range batch {
			step := int64(n + i)
			batch[i] = Point{Rank: int(step % 4), Step: step, Kind: Scalar, Name: fmt.Sprintf("s%d", (step/4)%16), Value: float64(step)}
		}
		s.Add(batch)
	}
	for i := range 100 {
		s.AddEvent(Event{Rank: -1, Kind: "stall", Text: fmt.Sprint(i)})
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	snap := s.Snapshot()
	// 4 ranks × 8 series each (of 16 names): the other 8 names dropped.
	if len(snap.Series) != 32 {
		t.Errorf("%d series, want 32", len(snap.Series))
	}
	for _, sr := range snap.Series {
		if len(sr.Steps) > 128 {
			t.Errorf("series %d/%s holds %d points", sr.Rank, sr.Name, len(sr.Steps))
		}
	}
	if got := s.DroppedSeries(); got != total/2 {
		t.Errorf("dropped %d points of unknown series, want %d", got, total/2)
	}
	if s.Accepted() != total/2 {
		t.Errorf("accepted %d, want %d", s.Accepted(), total/2)
	}
	// Events: the ring keeps the last 10, oldest first (the 4 "dropped"
	// events came before the 100 stalls).
	if len(snap.Events) != 10 || snap.Events[0].Text != "90" || snap.Events[9].Text != "99" {
		t.Errorf("events %v", snap.Events)
	}
	// 32 series of at most 129 points, about 16 bytes each: far below 1 MB
	// of heap kept, where keeping every point would take 16 MB.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("heap grew by %d bytes over 1e6 points", grew)
	}
}

func TestRankInfoFromRuntimePoints(t *testing.T) {
	s := NewStore(Config{})
	s.SetRank(1, "hostb", "running")
	s.Add([]Point{
		{Rank: 1, Step: 7, Kind: Runtime, Name: StepName, Value: 7},
		{Rank: 1, Step: 7, Kind: Runtime, Name: StepSecondsName, Value: 0.25},
		{Rank: 1, Step: 7, Kind: Runtime, Name: CommShareName, Value: 0.1},
		{Rank: 1, Step: 7, Kind: Runtime, Name: LinkSentPrefix + "0", Value: 4096},
		{Rank: 1, Step: 7, Kind: Runtime, Name: DroppedPointsName, Value: 3},
		{Rank: 1, Step: 7, Kind: Scalar, Name: StepName, Value: 99}, // a scalar of the same name is not the runtime's
	})
	snap := s.Snapshot()
	if len(snap.Ranks) != 1 {
		t.Fatalf("ranks %+v", snap.Ranks)
	}
	ri := snap.Ranks[0]
	if ri.Host != "hostb" || ri.State != "running" || ri.Step != 7 || ri.StepSeconds != 0.25 ||
		ri.CommShare != 0.1 || ri.LinkBytes[0] != 4096 || ri.Dropped != 3 {
		t.Errorf("rank info %+v", ri)
	}
	s.SetRank(1, "", "exited")
	if ri := s.Snapshot().Ranks[0]; ri.Host != "hostb" || ri.State != "exited" {
		t.Errorf("after SetRank(exited): %+v", ri)
	}
}

func TestBlockedSubscriberNeverBlocksAdd(t *testing.T) {
	s := NewStore(Config{SubscriberBuffer: 2})
	ch, cancel := s.Subscribe()
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			s.Add([]Point{{Rank: 0, Step: int64(i), Kind: Scalar, Name: "x", Value: 1}})
		}
		s.End()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Add blocked on a subscriber that does not read")
	}
	// The subscriber that fell behind is told to resync, and the end is
	// in what it reads.
	var resync, ended bool
	for len(ch) > 0 {
		u := <-ch
		resync = resync || u.Resync
		ended = ended || u.Ended
	}
	if !resync || !ended {
		t.Errorf("resync %t, ended %t", resync, ended)
	}
	if !s.Snapshot().Ended {
		t.Error("snapshot not ended")
	}
}

func TestSubscriberGetsUpdatesAndClose(t *testing.T) {
	s := NewStore(Config{})
	ch, cancel := s.Subscribe()
	s.Add([]Point{{Rank: 2, Step: 1, Kind: Scalar, Name: "loss", Value: 0.5}})
	s.AddEvent(Event{Rank: 2, Kind: "exit", Text: "exit 0"})
	u := <-ch
	if len(u.Points) != 1 || u.Points[0].Name != "loss" || u.Points[0].Time.IsZero() {
		t.Errorf("first update %+v", u)
	}
	if u := <-ch; len(u.Events) != 1 || u.Events[0].Kind != "exit" {
		t.Errorf("second update %+v", u)
	}
	ch2, cancel2 := s.Subscribe()
	cancel2()
	cancel2()
	if _, ok := <-ch2; ok {
		t.Error("cancelled channel not closed")
	}
	s.Close()
	if _, ok := <-ch; ok {
		t.Error("channel not closed by Close")
	}
	cancel() // after Close: harmless
	s.Add([]Point{{Rank: 0, Name: "late"}})
	if n := len(s.Snapshot().Series); n != 1 {
		t.Errorf("%d series after Close, want 1", n)
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := NewStore(Config{MaxPoints: 32, SubscriberBuffer: 4})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s.Add([]Point{{Rank: r, Step: int64(i), Kind: Runtime, Name: LinkSentPrefix + "1", Value: float64(i)},
					{Rank: r, Step: int64(i), Kind: Scalar, Name: "loss", Value: 1}})
				if i%100 == 0 {
					s.AddEvent(Event{Rank: r, Kind: "stall"})
					s.SetRank(r, "h", "running")
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			ch, cancel := s.Subscribe()
			defer cancel()
			for range 500 {
				select {
				case u := <-ch:
					for _, ri := range u.Ranks {
						_ = ri.LinkBytes[1]
					}
				default:
				}
				snap := s.Snapshot()
				for _, ri := range snap.Ranks {
					_ = ri.LinkBytes[1]
				}
			}
		})
	}
	wg.Wait()
	s.End()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if len(snap.Series) != 8 || !snap.Ended {
		t.Errorf("%d series, ended %t", len(snap.Series), snap.Ended)
	}
	for _, sr := range snap.Series {
		if sr.Steps[len(sr.Steps)-1] != 1999 {
			t.Errorf("rank %d %s ends at step %d", sr.Rank, sr.Name, sr.Steps[len(sr.Steps)-1])
		}
	}
}

func TestWriterLinesParseBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := NewWriter(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(Config{Out: w})
	s.SetRank(1, "hosta", "running")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	s.Add([]Point{{Rank: 1, Step: 3, Time: t0, Kind: Scalar, Name: "loss", Value: 0.25},
		{Rank: 1, Step: 3, Time: t0, Kind: Scalar, Name: "bad", Value: math.NaN()}})
	s.AddEvent(Event{Time: t0, Rank: 1, Kind: "failure", Text: "exit status 3"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var p Point
	if err := json.Unmarshal([]byte(lines[0]), &p); err != nil {
		t.Fatal(err)
	}
	want := Point{Rank: 1, Host: "hosta", Step: 3, Time: t0, Kind: Scalar, Name: "loss", Value: 0.25}
	if p != want {
		t.Errorf("point %+v, want %+v", p, want)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &raw); err != nil || raw["value"] != "NaN" || raw["name"] != "bad" {
		t.Errorf("NaN line %s: %v %v", lines[1], raw, err)
	}
	var e eventLine
	if err := json.Unmarshal([]byte(lines[2]), &e); err != nil || e.Event.Kind != "failure" || !e.Event.Time.Equal(t0) {
		t.Errorf("event line %s: %+v %v", lines[2], e, err)
	}
}

// TestWriterPeerField: a per-peer runtime series is written under its
// name without the peer, with the peer's rank in a field peer (0
// included); a scalar of the same shape of name, and a name whose end is
// no rank, stay as they are, without a peer.
func TestWriterPeerField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := NewWriter(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(Config{Out: w})
	s.Add([]Point{
		{Rank: 1, Step: 3, Kind: Runtime, Name: "hvd/link_sent_bytes/0", Value: 10},
		{Rank: 1, Step: 3, Kind: Runtime, Name: "hvd/link_recv_bytes/2", Value: 20},
		{Rank: 5, Step: 3, Kind: Runtime, Name: "ps/server_push_staleness/12", Value: 3},
		{Rank: 1, Step: 3, Kind: Scalar, Name: "hvd/link_sent_bytes/1", Value: 30},
		{Rank: 1, Step: 3, Kind: Runtime, Name: "hvd/link_sent_bytes/x", Value: 40},
		{Rank: 1, Step: 3, Kind: Runtime, Name: "hvd/link_sent_bytes/01", Value: 50},
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Rank  int     `json:"rank"`
		Name  string  `json:"name"`
		Peer  *int    `json:"peer"`
		Value float64 `json:"value"`
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		peer := "-"
		if x.Peer != nil {
			peer = strconv.Itoa(*x.Peer)
		}
		got = append(got, fmt.Sprintf("%d %s %s %v", x.Rank, x.Name, peer, x.Value))
	}
	want := []string{
		"1 hvd/link_sent_bytes 0 10",
		"1 hvd/link_recv_bytes 2 20",
		"5 ps/server_push_staleness 12 3",
		"1 hvd/link_sent_bytes/1 - 30",
		"1 hvd/link_sent_bytes/x - 40",
		"1 hvd/link_sent_bytes/01 - 50",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWriterLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := NewWriter(path, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(Config{Out: w})
	for i := range 100 {
		s.Add([]Point{{Rank: 0, Step: int64(i), Kind: Scalar, Name: "loss", Value: 1}})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1000 || fi.Size() < 800 {
		t.Errorf("file of %d bytes, limit 1000", fi.Size())
	}
	if s.Accepted() != 100 {
		t.Errorf("the store accepted %d points, want 100 (the file's limit is not the store's)", s.Accepted())
	}
}

func TestWriterFlushesWithoutClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := NewWriter(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.WritePoints([]Point{{Rank: 0, Name: "x", Kind: Scalar}})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Count(string(b), "\n") == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not flushed within 30s: %q %v", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPSRows: a parameter-server job's rows have their roles, and their
// steps and step times from the ps/ series (a worker's global step and
// step time, a server's step).
func TestPSRows(t *testing.T) {
	s := NewStore(Config{})
	s.SetRole(1, "worker")
	s.SetRank(1, "a", "running")
	s.SetRole(3, "ps")
	s.Add([]Point{
		{Rank: 1, Step: 7, Kind: Runtime, Name: PSGlobalStepName, Value: 7},
		{Rank: 1, Step: 7, Kind: Runtime, Name: PSStepSecondsName, Value: 0.25},
		{Rank: 3, Step: 9, Kind: Runtime, Name: PSServerStepName, Value: 9},
		{Rank: 3, Step: 9, Kind: Scalar, Name: PSServerStepName, Value: 100}, // a scalar: not the row's
	})
	snap := s.Snapshot()
	if len(snap.Ranks) != 2 {
		t.Fatalf("rows %+v", snap.Ranks)
	}
	w, p := snap.Ranks[0], snap.Ranks[1]
	if w.Role != "worker" || w.State != "running" || w.Step != 7 || w.StepSeconds != 0.25 {
		t.Errorf("the worker's row %+v", w)
	}
	if p.Role != "ps" || p.State != "starting" || p.Step != 9 {
		t.Errorf("the server's row %+v", p)
	}
}
