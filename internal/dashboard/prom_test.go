package dashboard

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/metrics"
)

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }

// promSample is one parsed sample line.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	promName  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promLabel = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseProm parses Prometheus's text format 0.0.4 strictly: every sample
// after its family's HELP and TYPE, families not interleaved, names and
// labels well formed, no sample twice. It stands in for expfmt, which
// this module does not depend on.
func parseProm(text string) (map[string]string, []promSample, error) {
	types := map[string]string{}
	var samples []promSample
	seen := map[string]bool{}
	done := map[string]bool{}
	current := ""
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n++
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if done[name] || name == current {
				return nil, nil, fmt.Errorf("line %d: family %s again", n, name)
			}
			if current != "" {
				done[current] = true
			}
			current = name
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if name != current || types[name] != "" {
				return nil, nil, fmt.Errorf("line %d: TYPE of %s out of place", n, name)
			}
			if typ != "gauge" && typ != "counter" {
				return nil, nil, fmt.Errorf("line %d: type %q", n, typ)
			}
			types[name] = typ
			continue
		}
		s := promSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, nil, fmt.Errorf("line %d: %q", n, line)
		}
		s.name = line[:i]
		if !promName.MatchString(s.name) {
			return nil, nil, fmt.Errorf("line %d: name %q", n, s.name)
		}
		if s.name != current || types[current] == "" {
			return nil, nil, fmt.Errorf("line %d: sample of %s outside its family", n, s.name)
		}
		rest := line[i:]
		if rest[0] == '{' {
			rest = rest[1:]
			for rest[0] != '}' {
				eq := strings.Index(rest, `="`)
				if eq < 0 {
					return nil, nil, fmt.Errorf("line %d: labels %q", n, rest)
				}
				ln := rest[:eq]
				if !promLabel.MatchString(ln) {
					return nil, nil, fmt.Errorf("line %d: label name %q", n, ln)
				}
				rest = rest[eq+2:]
				var v strings.Builder
				for {
					if rest == "" {
						return nil, nil, fmt.Errorf("line %d: unterminated label", n)
					}
					c := rest[0]
					rest = rest[1:]
					if c == '"' {
						break
					}
					if c == '\\' {
						switch rest[0] {
						case '\\', '"':
							v.WriteByte(rest[0])
						case 'n':
							v.WriteByte('\n')
						default:
							return nil, nil, fmt.Errorf("line %d: escape \\%c", n, rest[0])
						}
						rest = rest[1:]
						continue
					}
					v.WriteByte(c)
				}
				s.labels[ln] = v.String()
				rest = strings.TrimPrefix(rest, ",")
			}
			rest = rest[1:]
		}
		val, ok := strings.CutPrefix(rest, " ")
		if !ok {
			return nil, nil, fmt.Errorf("line %d: no value", n)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: value %q", n, val)
		}
		s.value = v
		id := fmt.Sprint(s.name, s.labels)
		if seen[id] {
			return nil, nil, fmt.Errorf("line %d: sample %s twice", n, id)
		}
		seen[id] = true
		samples = append(samples, s)
	}
	return types, samples, nil
}

func find(samples []promSample, name string, labels ...string) (float64, bool) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	f := newFakeSource("prom")
	for k := int64(1); k <= 5; k++ {
		f.Add(step(3, k))
	}
	f.Add(metrics.Update{Points: []metrics.Point{
		{Rank: 0, Step: 5, Kind: metrics.Scalar, Name: "weird/name\"with\\quotes\n", Value: nan()},
		{Rank: 0, Step: 5, Kind: metrics.Scalar, Name: "weird.name\"with\\quotes\n", Value: inf()},
		{Rank: 1, Step: 5, Kind: metrics.Scalar, Name: "rank_step", Value: 7},
		{Rank: 0, Step: 5, Kind: metrics.Runtime, Name: "hvd/link_sent_bytes/1", Value: 123},
		{Rank: 0, Step: 5, Kind: metrics.Runtime, Name: "hvd/link_sent_bytes/2", Value: 124},
		{Rank: 1, Step: 5, Kind: metrics.Runtime, Name: "hvd/link_recv_bytes/0", Value: 45},
	}})
	f.snap.Ranks[2].Dropped = 11
	f.snap.Ranks[1].Host = `odd"host`
	s := serve(t, Config{Source: f})
	resp, body := get(t, base(s)+"/metrics")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != PrometheusContentType {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	types, samples, err := parseProm(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	for name, want := range map[string]string{
		"gorovod_loss": "gauge", "gorovod_accuracy": "gauge", "gorovod_hvd_step_seconds": "gauge",
		"gorovod_rank_step": "gauge", "gorovod_rank_step_seconds": "gauge", "gorovod_rank_dropped_points_total": "counter",
		"gorovod_rank_link_sent_bytes_total": "counter", "gorovod_series_rank_step": "gauge",
	} {
		if types[name] != want {
			t.Errorf("type of %s: %q, want %q", name, types[name], want)
		}
	}
	// The latest loss of rank 2 at step 5.
	wantLoss := step(3, 5).Points[2*5].Value
	if v, ok := find(samples, "gorovod_loss", "rank", "2", "host", "node1", "kind", "scalar", "name", "loss"); !ok || v != wantLoss {
		t.Errorf("gorovod_loss{rank=2}: %v %v, want %v", v, ok, wantLoss)
	}
	if v, ok := find(samples, "gorovod_rank_step", "rank", "1", "host", `odd"host`); !ok || v != 5 {
		t.Errorf("gorovod_rank_step{rank=1}: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_rank_dropped_points_total", "rank", "2"); !ok || v != 11 {
		t.Errorf("dropped of rank 2: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_rank_link_sent_bytes_total", "rank", "0", "peer", "1"); !ok || v != 5*2<<20 {
		t.Errorf("link 0→1: %v %v", v, ok)
	}
	// Per-link series: one family per direction, the peer a label.
	for _, c := range []struct {
		family, rank, peer string
		want               float64
	}{{"gorovod_hvd_link_sent_bytes", "0", "1", 123}, {"gorovod_hvd_link_sent_bytes", "0", "2", 124}, {"gorovod_hvd_link_recv_bytes", "1", "0", 45}} {
		if v, ok := find(samples, c.family, "rank", c.rank, "peer", c.peer, "kind", "runtime"); !ok || v != c.want || types[c.family] != "gauge" {
			t.Errorf("%s{rank=%s,peer=%s}: %v %v (type %q), want %v", c.family, c.rank, c.peer, v, ok, types[c.family], c.want)
		}
	}
	for name := range types {
		if strings.HasPrefix(name, "gorovod_hvd_link_sent_bytes_") || strings.HasPrefix(name, "gorovod_hvd_link_recv_bytes_") {
			t.Errorf("a family per peer: %s", name)
		}
	}
	if v, ok := find(samples, "gorovod_rank_step_seconds", "rank", "0"); !ok || v <= 0 || v > 1 {
		t.Errorf("step seconds of rank 0: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_weird_name_with_quotes_", "name", "weird/name\"with\\quotes\n"); !ok || !math.IsNaN(v) {
		t.Errorf("NaN sample: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_weird_name_with_quotes_", "name", "weird.name\"with\\quotes\n"); !ok || !math.IsInf(v, 1) {
		t.Errorf("+Inf sample: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_series_rank_step", "rank", "1"); !ok || v != 7 {
		t.Errorf("scalar rank_step: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_job_ended"); !ok || v != 0 {
		t.Errorf("job ended: %v %v", v, ok)
	}
	if v, ok := find(samples, "gorovod_rank_state", "rank", "0", "state", "running"); !ok || v != 1 {
		t.Errorf("state: %v %v", v, ok)
	}
}

func TestMetricName(t *testing.T) {
	for in, want := range map[string]string{
		"loss":             "gorovod_loss",
		"hvd/step_seconds": "gorovod_hvd_step_seconds",
		"val-acc@top5":     "gorovod_val_acc_top5",
		"ünï":              "gorovod__n_",
		"rank_step":        "gorovod_series_rank_step",
		"a:b":              "gorovod_a:b",
		"9lives":           "gorovod_9lives",
	} {
		if got := MetricName(in); got != want {
			t.Errorf("MetricName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPrometheusServerStaleness: a parameter server's per-worker series
// ps/server_push_staleness/P is one family with the worker as peer.
func TestPrometheusServerStaleness(t *testing.T) {
	snap := metrics.Snapshot{Ranks: []metrics.RankInfo{{Rank: 3, Host: "h", State: "running", Role: "ps"}},
		Series: []metrics.Series{
			{Rank: 3, Kind: metrics.Runtime, Name: "ps/server_push_staleness/1", Steps: []int64{5}, Values: []float64{2}},
			{Rank: 3, Kind: metrics.Runtime, Name: "ps/server_push_staleness/2", Steps: []int64{5}, Values: []float64{0}},
		}}
	var b strings.Builder
	if err := WritePrometheus(&b, snap); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`gorovod_ps_server_push_staleness{rank="3",host="h",kind="runtime",name="ps/server_push_staleness/1",peer="1"} 2` + "\n",
		`gorovod_ps_server_push_staleness{rank="3",host="h",kind="runtime",name="ps/server_push_staleness/2",peer="2"} 0` + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no line %q in:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "gorovod_ps_server_push_staleness_1") {
		t.Errorf("a family per peer:\n%s", b.String())
	}
}
