package dashboard

import (
	"bufio"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/metrics"
)

// PrometheusContentType is the Content-Type of /metrics: Prometheus's
// text exposition format, version 0.0.4.
const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

// The families /metrics has for every rank besides its series.
var rankFamilies = []struct{ name, typ, help string }{
	{"gorovod_rank_state", "gauge", "1 for the rank's state (starting, running, exited, failed, killed)."},
	{"gorovod_rank_step", "gauge", "The rank's latest step (hvd/step)."},
	{"gorovod_rank_step_seconds", "gauge", "The rank's latest step time in seconds (hvd/step_seconds)."},
	{"gorovod_rank_comm_share", "gauge", "The rank's latest share of step time spent communicating (hvd/comm_share)."},
	{"gorovod_rank_link_sent_bytes_total", "counter", "Bytes the rank sent to peer (hvd/link_sent_bytes)."},
	{"gorovod_rank_dropped_points_total", "counter", "Metric points the rank dropped."},
	{"gorovod_job_ended", "gauge", "1 once the job has ended."},
	{"gorovod_job_start_time_seconds", "gauge", "When the job started, in seconds since the Unix epoch."},
}

// MetricName is the Prometheus family of a series: "gorovod_" and the
// name with every character other than a letter, digit, '_' or ':' made
// '_' ("hvd/step_seconds" is gorovod_hvd_step_seconds). A name that would
// be one of the families /metrics keeps for ranks and the job gets
// "gorovod_series_" instead.
func MetricName(series string) string {
	var b strings.Builder
	b.WriteString("gorovod_")
	for _, r := range series {
		if r == '_' || r == ':' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	for _, f := range rankFamilies {
		if name == f.name {
			return "gorovod_series_" + name[len("gorovod_"):]
		}
	}
	return name
}

// WritePrometheus writes snap in Prometheus's text format 0.0.4: for each
// series, its latest value on each rank as a gauge MetricName(series)
// with labels rank, host, kind and name (the series' own name, which
// keeps apart two that sanitize alike), except that the per-peer series
// (metrics.SplitPeer: hvd/link_sent_bytes/P, hvd/link_recv_bytes/P,
// ps/server_push_staleness/P) are one family each,
// gorovod_hvd_link_sent_bytes and so on, with the peer P as a label peer,
// as metrics.jsonl has it in a field; then each rank's state, step,
// step time, communication share, link traffic and dropped points, and
// whether the job ended. Families and samples come in a fixed order.
func WritePrometheus(w io.Writer, snap metrics.Snapshot) error {
	bw := bufio.NewWriter(w)
	hosts := make(map[int]string, len(snap.Ranks))
	for _, r := range snap.Ranks {
		hosts[r.Rank] = r.Host
	}

	type sample struct {
		rank  int
		kind  metrics.Kind
		name  string
		peer  string // of a per-link series; "" for others
		value float64
	}
	families := map[string][]sample{}
	for _, s := range snap.Series {
		if len(s.Values) == 0 {
			continue
		}
		m, peer := MetricName(s.Name), ""
		if base, p, ok := metrics.SplitPeer(s.Kind, s.Name); ok {
			m, peer = MetricName(base), strconv.Itoa(p)
		}
		families[m] = append(families[m], sample{s.Rank, s.Kind, s.Name, peer, s.Values[len(s.Values)-1]})
	}
	names := make([]string, 0, len(families))
	for m := range families {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		ss := families[m]
		sort.Slice(ss, func(i, j int) bool {
			if ss[i].name != ss[j].name {
				return ss[i].name < ss[j].name
			}
			return ss[i].rank < ss[j].rank
		})
		help := "Latest value of the series " + ss[0].name + " on each rank."
		if ss[0].peer != "" {
			help = "Latest value of the series " + strings.TrimSuffix(ss[0].name, ss[0].peer) + "PEER on each rank, by peer."
		}
		writeHeader(bw, m, "gauge", help)
		for _, s := range ss {
			labels := []string{"rank", strconv.Itoa(s.rank), "host", hosts[s.rank], "kind", string(s.kind), "name", s.name}
			if s.peer != "" {
				labels = append(labels, "peer", s.peer)
			}
			writeSample(bw, m, s.value, labels...)
		}
	}

	ranks := append([]metrics.RankInfo(nil), snap.Ranks...)
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	for _, f := range rankFamilies {
		writeHeader(bw, f.name, f.typ, f.help)
		switch f.name {
		case "gorovod_job_ended":
			v := 0.0
			if snap.Ended {
				v = 1
			}
			writeSample(bw, f.name, v)
			continue
		case "gorovod_job_start_time_seconds":
			writeSample(bw, f.name, float64(snap.Start.UnixNano())/1e9)
			continue
		}
		for _, r := range ranks {
			rank := strconv.Itoa(r.Rank)
			switch f.name {
			case "gorovod_rank_state":
				writeSample(bw, f.name, 1, "rank", rank, "host", r.Host, "state", r.State)
			case "gorovod_rank_step":
				writeSample(bw, f.name, float64(r.Step), "rank", rank, "host", r.Host)
			case "gorovod_rank_step_seconds":
				writeSample(bw, f.name, r.StepSeconds, "rank", rank, "host", r.Host)
			case "gorovod_rank_comm_share":
				writeSample(bw, f.name, r.CommShare, "rank", rank, "host", r.Host)
			case "gorovod_rank_link_sent_bytes_total":
				peers := make([]int, 0, len(r.LinkBytes))
				for p := range r.LinkBytes {
					peers = append(peers, p)
				}
				sort.Ints(peers)
				for _, p := range peers {
					writeSample(bw, f.name, r.LinkBytes[p], "rank", rank, "host", r.Host, "peer", strconv.Itoa(p))
				}
			case "gorovod_rank_dropped_points_total":
				writeSample(bw, f.name, float64(r.Dropped), "rank", rank, "host", r.Host)
			}
		}
	}
	return bw.Flush()
}

func writeHeader(w *bufio.Writer, name, typ, help string) {
	w.WriteString("# HELP ")
	w.WriteString(name)
	w.WriteByte(' ')
	w.WriteString(escapeHelp(help))
	w.WriteString("\n# TYPE ")
	w.WriteString(name)
	w.WriteByte(' ')
	w.WriteString(typ)
	w.WriteByte('\n')
}

// writeSample writes one line; labels are name, value pairs.
func writeSample(w *bufio.Writer, name string, v float64, labels ...string) {
	w.WriteString(name)
	if len(labels) > 0 {
		w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(labels[i])
			w.WriteString(`="`)
			w.WriteString(escapeLabel(labels[i+1]))
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatValue(v))
	w.WriteByte('\n')
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
