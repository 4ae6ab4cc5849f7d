package metrics

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestAppendPointLineIsJSONMarshal: for points with values of every
// magnitude and sign (zero, -0, subnormals, the exponent-form bounds,
// NaN and infinities), plain and per-peer names, names and hosts that
// need escaping, with and without a host, and times in and out of
// encoding/json's range, a point's line is the bytes of json.Marshal of
// its pointLine, or appendPointLine declines (nil) and the Writer falls
// back to json.Marshal: exactly those with a name or host that needs
// escaping or a time past the year 9999.
func TestAppendPointLineIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 9.999999e-7, 1e-7, -1e-7, 1e21, 9.99e20, 1e22, -1e300,
		math.SmallestNonzeroFloat64, math.MaxFloat64, 123456789.125, 1e-10, 3e-100, math.NaN(), math.Inf(1), math.Inf(-1)}
	for range 2000 {
		values = append(values, math.Float64frombits(rng.Uint64()), rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)))
	}
	names := []string{"loss", "hvd/link_sent_bytes/3", "ps/server_push_staleness/12", "hvd/link_recv_bytes/x", "a<b>&c", "quote\"d", "tab\there", "é", "\xff", ""}
	hosts := []string{"", "node-1", "h<1>"}
	times := []time.Time{time.Unix(0, 1764300000123456789), time.Unix(0, 1764300000000000000).UTC(), time.Time{},
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 1, 2, 3, 400, time.FixedZone("x", 3600))}
	var tt timeText
	plain := map[string]bool{"loss": true, "hvd/link_sent_bytes/3": true, "ps/server_push_staleness/12": true, "hvd/link_sent_bytes": true, "ps/server_push_staleness": true, "hvd/link_recv_bytes/x": true, "": true, "node-1": true}
	for i, v := range values {
		p := Point{Rank: i % 5, Host: hosts[i%len(hosts)], Step: int64(i) * 7919, Time: times[i%len(times)],
			Kind: []Kind{Scalar, Runtime}[i%2], Name: names[i%len(names)], Value: v}
		want, err := json.Marshal(line(&p))
		got := appendPointLine(nil, &p, &tt)
		if again := appendPointLine(nil, &p, nil); string(again) != string(got) {
			t.Fatalf("point %+v: %s with the last time kept, %s without", p, got, again)
		}
		l := line(&p)
		if decline := !plain[l.Name] || !plain[p.Host] || p.Time.Year() > 9999; (got == nil) != decline {
			t.Fatalf("point %+v: declined %t, want %t", p, got == nil, decline)
		}
		if got == nil {
			if err == nil && p.Time.Year() > 9999 {
				t.Fatalf("json.Marshal took the year %d", p.Time.Year())
			}
			continue
		}
		if err != nil || string(got) != string(want) {
			t.Fatalf("point %+v:\n got %s\nwant %s (err %v)", p, got, want, err)
		}
	}
}

// BenchmarkWriterPoints is gorun's cost per point with --metrics-dir: a
// Store that writes metrics.jsonl takes batches of 4,096 scalar points
// of 4 ranks, a call of 4 scalars sharing a time. ns/op is what taking a
// point costs (the Store and the Writer's spool); lines-ns/point is what
// its line costs later (the Writer's budgeted goroutine, or Close: here
// Close writes them all).
func BenchmarkWriterPoints(b *testing.B) {
	w, err := newWriter(filepath.Join(b.TempDir(), "m.jsonl"), 0, nil, time.Nanosecond)
	if err != nil {
		b.Fatal(err)
	}
	s := NewStore(Config{Out: w})
	names := []string{"loss", "accuracy", "lr", "samples_per_second"}
	pts := make([]Point, 4096)
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(pts) {
		b.StopTimer()
		for k := range pts {
			pts[k] = Point{Rank: k % 4, Step: int64(i + k), Time: now.Add(time.Duration((i + k) / 4)), Kind: Scalar, Name: names[k%4], Value: float64(k) / 3}
		}
		b.StartTimer()
		s.Add(pts)
	}
	b.StopTimer()
	t0 := time.Now()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N), "lines-ns/point")
}
