package rendezvous

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPushMetrics(t *testing.T) {
	secret := newSecret(t)
	var mu sync.Mutex
	var got []MetricPoint
	var ranks []int
	srv := startServer(t, ServerConfig{Secret: secret, Size: 2, OnMetrics: func(rank int, points []MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		ranks = append(ranks, rank)
		got = append(got, points...)
	}})
	c := dial(t, srv.Addr(), secret)
	pts := []MetricPoint{{Step: 3, Time: 42, Name: "loss", Value: 0.5}, {Step: 3, Name: "hvd/step", Value: 3, Runtime: true}}
	if err := c.PushMetrics(ctxFor(t, 10*time.Second), 1, pts); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(ranks) != 1 || ranks[0] != 1 || len(got) != 2 || got[0] != pts[0] || got[1] != pts[1] {
		t.Errorf("server got rank %v, points %+v", ranks, got)
	}
	mu.Unlock()

	for _, bad := range [][]MetricPoint{{{Name: ""}}, {{Name: strings.Repeat("x", MaxKeyLen+1)}}, make([]MetricPoint, MaxMetricPoints+1)} {
		if err := c.PushMetrics(ctxFor(t, 10*time.Second), 0, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%d points, first name of %d bytes: %v, want ErrBadRequest", len(bad), len(bad[0].Name), err)
		}
	}
	if err := c.PushMetrics(ctxFor(t, 10*time.Second), -1, pts); !errors.Is(err, ErrBadRequest) {
		t.Errorf("rank -1: %v", err)
	}
}

func TestPushMetricsWithoutReceiver(t *testing.T) {
	secret := newSecret(t)
	srv := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c := dial(t, srv.Addr(), secret)
	err := c.PushMetrics(ctxFor(t, 10*time.Second), 0, []MetricPoint{{Name: "loss", Value: 1}})
	if !errors.Is(err, ErrNoMetrics) {
		t.Errorf("got %v, want ErrNoMetrics", err)
	}
}

// packPoints encodes points as a Batch does, leaving out invalid ones.
func packPoints(points []MetricPoint) []byte {
	var b Batch
	for _, p := range points {
		b.Add(p)
	}
	return b.Bytes()
}

// TestPackPoints: points come back as they were packed (names repeated
// and new, steps and times going back and forth, runtime marks, event
// texts), and a cut or altered packing is an error, never a panic.
func TestPackPoints(t *testing.T) {
	pts := []MetricPoint{
		{Step: 7, Time: 1_700_000_000_000_000_000, Name: "loss", Value: 0.25},
		{Step: 7, Time: 1_700_000_000_000_000_010, Name: "hvd/step", Value: 7, Runtime: true},
		{Step: 3, Time: 1_600_000_000_000_000_000, Name: "loss", Value: -1e300},
		{Step: -2, Time: 0, Name: "stall", Text: "rank 1: [grad]"},
		{Step: 1 << 62, Time: -5, Name: "hvd/step", Value: 0, Runtime: true},
	}
	b := packPoints(pts)
	got, err := ReadBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pts) {
		t.Fatalf("got %d points, want %d", len(got), len(pts))
	}
	for i := range pts {
		if got[i] != pts[i] {
			t.Errorf("point %d: got %+v, want %+v", i, got[i], pts[i])
		}
	}
	// More names than packNames scans: the rest are numbered by its map.
	var many []MetricPoint
	for round := range 2 {
		for i := range 3 * packScan {
			many = append(many, MetricPoint{Step: int64(round), Name: "n" + strconv.Itoa(i), Value: float64(i)})
		}
	}
	if got, err := ReadBatch(nil, packPoints(many)); err != nil || !slices.Equal(got, many) {
		t.Errorf("%d names twice: %v, equal %t", 3*packScan, err, slices.Equal(got, many))
	}
	if got, err := ReadBatch(nil, packPoints(nil)); err != nil || len(got) != 0 {
		t.Errorf("no points: %v, %v", got, err)
	}
	for n := range len(b) {
		if _, err := ReadBatch(nil, b[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := ReadBatch(nil, append(b[:len(b):len(b)], 0)); err == nil {
		t.Error("a trailing byte decoded")
	}
	bad := map[string][]byte{
		"too many points": binary.AppendUvarint(nil, MaxMetricPoints+1),
		"unknown name":    {1, 0, 3},
		"empty name":      {1, packNewName, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"long name":       binary.AppendUvarint([]byte{1, packNewName}, MaxKeyLen+1),
		"long text":       binary.AppendUvarint([]byte{1, packNewName | packText, 1, 'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, MaxEventText+1),
	}
	for what, b := range bad {
		if _, err := ReadBatch(nil, b); err == nil {
			t.Errorf("%s: decoded", what)
		}
	}
}

// TestPushMetricsBadPacking: a packing the server cannot read is
// ErrBadRequest, and OnMetrics sees nothing of it.
func TestPushMetricsBadPacking(t *testing.T) {
	secret := newSecret(t)
	var calls atomic.Int32
	srv := startServer(t, ServerConfig{Secret: secret, Size: 1, OnMetrics: func(int, []MetricPoint) { calls.Add(1) }})
	c := dial(t, srv.Addr(), secret)
	_, err := c.call(ctxFor(t, 10*time.Second), "PushMetrics", &metricsReq{Rank: 0, Packed: []byte{2, packNewName, 1, 'x'}}, 10*time.Second)
	if !errors.Is(err, ErrBadRequest) {
		t.Errorf("got %v, want ErrBadRequest", err)
	}
	long := []MetricPoint{{Name: "stall", Text: strings.Repeat("x", MaxEventText+1)}}
	if err := c.PushMetrics(ctxFor(t, 10*time.Second), 0, long); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a long text: %v, want ErrBadRequest", err)
	}
	if calls.Load() != 0 {
		t.Errorf("OnMetrics called %d times", calls.Load())
	}
}

// BenchmarkPackPoints is the cost per point of packing and unpacking a
// batch like those of hvd.LogScalars (4 names, one step per 4 points).
func BenchmarkPackPoints(b *testing.B) {
	pts := make([]MetricPoint, 4096)
	names := []string{"loss", "accuracy", "lr", "samples_per_second"}
	for i := range pts {
		pts[i] = MetricPoint{Step: int64(i / 4), Time: int64(1_700_000_000_000_000_000 + i*25_000), Name: names[i%4], Value: float64(i)}
	}
	for b.Loop() {
		if _, err := ReadBatch(nil, packPoints(pts)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pts)), "ns/point")
}

// TestBatch: a Batch takes valid points up to MaxMetricPoints and refuses
// the rest without a trace; what it packs decodes to the points it took;
// after Reset it packs afresh (its names too); PushBatch delivers it and
// leaves it as it was.
func TestBatch(t *testing.T) {
	var b Batch
	valid := []MetricPoint{
		{Step: 1, Time: 10, Name: "loss", Value: 0.5},
		{Step: 1, Time: 10, Name: "hvd/step", Value: 1, Runtime: true},
		{Step: 2, Time: 5, Name: "loss", Value: 0.25},
		{Step: 2, Time: 5, Name: "stall", Text: "rank 1 waits"},
	}
	invalid := []MetricPoint{{Name: ""}, {Name: strings.Repeat("n", MaxKeyLen+1)}, {Name: "stall", Text: strings.Repeat("t", MaxEventText+1)}}
	for i, p := range valid {
		if !b.Add(p) {
			t.Fatalf("Add(%+v) refused", p)
		}
		if b.Add(invalid[i%len(invalid)]) {
			t.Errorf("Add took the invalid %q (%d bytes of text)", invalid[i%len(invalid)].Name, len(invalid[i%len(invalid)].Text))
		}
	}
	if b.Len() != len(valid) {
		t.Fatalf("Len %d, want %d", b.Len(), len(valid))
	}
	if got, err := ReadBatch(nil, b.Bytes()); err != nil || !slices.Equal(got, valid) {
		t.Fatalf("unpacked %+v, %v; want %+v", got, err, valid)
	}
	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("Len %d after Reset", b.Len())
	}
	// The names packed before Reset are new again; the count takes its
	// two bytes at MaxMetricPoints too.
	full := make([]MetricPoint, MaxMetricPoints)
	for i := range full {
		full[i] = MetricPoint{Step: int64(i / 2), Time: int64(1e18) + int64(i), Name: [2]string{"hvd/step", "acc"}[i%2], Value: float64(i), Runtime: i%2 == 0}
		if !b.Add(full[i]) {
			t.Fatalf("point %d refused", i)
		}
	}
	if b.Add(valid[0]) || b.Len() != MaxMetricPoints {
		t.Fatalf("a point past MaxMetricPoints taken (Len %d)", b.Len())
	}
	if got, err := ReadBatch(nil, b.Bytes()); err != nil || !slices.Equal(got, full) {
		t.Fatalf("a full batch: %d points, %v", len(got), err)
	}

	secret := newSecret(t)
	var mu sync.Mutex
	var got []MetricPoint
	srv := startServer(t, ServerConfig{Secret: secret, Size: 2, OnMetrics: func(rank int, points []MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, points...)
	}})
	c := dial(t, srv.Addr(), secret)
	for range 2 {
		if err := c.PushBatch(ctxFor(t, 10*time.Second), 1, &b); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2*MaxMetricPoints || !slices.Equal(got[:MaxMetricPoints], full) || !slices.Equal(got[MaxMetricPoints:], full) {
		t.Errorf("the server got %d points, want the batch twice (%d)", len(got), 2*MaxMetricPoints)
	}
	if err := c.PushBatch(ctxFor(t, 10*time.Second), -1, &b); !errors.Is(err, ErrBadRequest) {
		t.Errorf("rank -1: %v", err)
	}
}
