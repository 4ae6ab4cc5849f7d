package metrics

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/rendezvous"
)

// readLines returns the lines of the file at path.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestWriterSpoolKeepsOrder: points that go into spool records (from
// WritePoints and WriteRankPoints, of several ranks and hosts, runs longer
// than a record), points that go as lines (a time in another zone, one
// out of the range of Unix nanoseconds, a name that needs escaping, a
// kind of its own) and events come out as the lines their writing makes
// directly, in the order they were taken; the spool leaves no file.
func TestWriterSpoolKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.jsonl")
	w, err := NewWriter(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d files, want metrics.jsonl alone", len(ents))
	}
	var want []string
	pointLines := func(ps []Point) {
		for i := range ps {
			b := pointJSON(nil, &ps[i], nil)
			if b == nil {
				t.Fatalf("no line for %+v", ps[i])
			}
			want = append(want, string(b))
		}
	}
	t0 := time.Unix(1_764_000_000, 123_456_789)
	var ps []Point
	for i := range 3*spoolRecord + 7 { // runs across records, ranks and hosts
		ps = append(ps, Point{Rank: i / 600, Host: []string{"a", "b"}[i/900], Step: int64(i), Time: t0.Add(time.Duration(i)),
			Kind: []Kind{Scalar, Runtime}[i%2], Name: []string{"loss", "hvd/link_sent_bytes/3"}[i%2], Value: float64(i) / 7})
	}
	odd := []Point{
		{Rank: 1, Step: 1, Time: t0.UTC(), Kind: Scalar, Name: "loss", Value: 1},
		{Rank: 1, Step: 2, Time: time.Date(2300, 1, 1, 0, 0, 0, 0, time.Local), Kind: Scalar, Name: "loss", Value: 2},
		{Rank: 1, Step: 3, Time: t0, Kind: Scalar, Name: "a<b>", Value: math.Inf(-1)},
		{Rank: 1, Step: 4, Time: t0, Kind: "custom", Name: "x", Value: 4},
		{Rank: 1, Step: 5, Time: t0, Kind: Scalar, Name: "after", Value: math.NaN()},
	}
	w.WritePoints(ps)
	pointLines(ps)
	w.WritePoints(odd)
	pointLines(odd)
	e := Event{Time: t0, Rank: 2, Kind: "failure", Text: "exit \"3\""}
	w.WriteEvent(e)
	j, _ := json.Marshal(eventLine{e})
	want = append(want, string(j))
	var mps []rendezvous.MetricPoint
	for i := range spoolRecord + 1 {
		mps = append(mps, rendezvous.MetricPoint{Step: int64(i), Time: t0.UnixNano() + int64(i), Name: "acc", Value: float64(i), Runtime: i == 3})
	}
	w.WriteRankPoints(5, "h5", mps)
	for _, mp := range mps {
		p := Point{Rank: 5, Host: "h5", Step: mp.Step, Time: time.Unix(0, mp.Time), Kind: Scalar, Name: mp.Name, Value: mp.Value}
		if mp.Runtime {
			p.Kind = Runtime
		}
		pointLines([]Point{p})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("after Close the directory holds %d files, want metrics.jsonl alone", len(ents))
	}
}

// TestWriterLineBudget: with a budget spent by the first record, each
// writing of lines while the Writer is open writes one record's lines
// and leaves the rest in the spool, in order; Close writes them all.
func TestWriterLineBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	w, err := newWriter(path, 0, nil, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10 * spoolRecord
	t0 := time.Unix(1_764_000_000, 0)
	ps := make([]Point, n)
	for i := range ps {
		ps[i] = Point{Rank: 0, Step: int64(i), Time: t0, Kind: Scalar, Name: "loss", Value: float64(i)}
	}
	w.WritePoints(ps)
	w.lines(time.Nanosecond)
	got := len(readLines(t, path))
	// The flusher may have run too, once a FlushInterval.
	if got < spoolRecord || got%spoolRecord != 0 || got > n/2 {
		t.Errorf("%d lines after one writing within the budget, want a record's (%d), or a few", got, spoolRecord)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != n {
		t.Fatalf("%d lines after Close, want %d", len(lines), n)
	}
	for i, l := range lines {
		var p Point
		if err := json.Unmarshal([]byte(l), &p); err != nil || p.Step != int64(i) || p.Value != float64(i) {
			t.Fatalf("line %d: %s (%v)", i, l, err)
		}
	}
}

// TestWriterSpoolLimit: the spool stops at the Writer's limit too, with
// one warning, and the file keeps to its limit.
func TestWriterSpoolLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	var log testutil.SyncBuffer
	w, err := NewWriter(path, 4096, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1000)
	for i := range 20 {
		w.WriteEvent(Event{Time: time.Unix(0, int64(i)), Kind: "k", Text: big})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 4096 || fi.Size() < 3000 {
		t.Errorf("file of %d bytes, limit 4096", fi.Size())
	}
	if c := strings.Count(log.String(), "spool reached"); c != 1 {
		t.Errorf("%d warnings of the spool's limit, want 1:\n%s", c, log.String())
	}
}
