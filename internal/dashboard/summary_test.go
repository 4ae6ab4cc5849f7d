package dashboard

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/metrics"
)

func TestWriteSummarySVG(t *testing.T) {
	f := newFakeSource("summary <np=3> & co")
	for k := int64(1); k <= 50; k++ {
		f.Add(step(3, k))
	}
	f.Add(metrics.Update{Points: []metrics.Point{{Rank: 0, Step: 51, Kind: metrics.Scalar, Name: "loss", Value: nan()}}, Ended: true})
	var buf bytes.Buffer
	if err := WriteSummarySVG(&buf, f.Snapshot()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	d := xml.NewDecoder(strings.NewReader(out))
	var texts []string
	root, lines, spreads, scripts := "", 0, 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tk.Name.Local
			}
			for _, a := range tk.Attr {
				if a.Name.Local == "class" && a.Value == "line" {
					lines++
				}
				if a.Name.Local == "class" && a.Value == "spread" {
					spreads++
				}
			}
			if tk.Name.Local == "script" {
				scripts++
			}
		case xml.CharData:
			texts = append(texts, string(tk))
		}
	}
	if root != "svg" || scripts != 0 {
		t.Errorf("root %q, %d scripts", root, scripts)
	}
	all := strings.Join(texts, "\n")
	for _, name := range []string{"loss", "accuracy", "hvd/allreduce_bytes", "hvd/busbw_gbps", StepSecondsSeries, "summary <np=3> & co"} {
		if !strings.Contains(all, name) {
			t.Errorf("summary lacks %q", name)
		}
	}
	if i, j := strings.Index(all, "loss"), strings.Index(all, "accuracy"); i < 0 || j < i {
		t.Error("loss does not come before accuracy")
	}
	if lines != 4*3 {
		t.Errorf("%d lines, want 12 (4 series × 3 ranks)", lines)
	}
	if spreads != 3 {
		t.Errorf("%d step-time bars, want 3", spreads)
	}

	// Nothing to draw is still a picture.
	buf.Reset()
	if err := WriteSummarySVG(&buf, metrics.Snapshot{}); err != nil || xml.Unmarshal(buf.Bytes(), new(struct{})) != nil {
		t.Errorf("empty summary: %v", err)
	}
}

// TestWriteSummarySVGParameterServers: a parameter-server job's summary
// charts each ps/server_* series (one chart per worker's push staleness,
// in the workers' order), the workers' ps/staleness, and the spread of
// the workers' ps/step_seconds when no rank has hvd/step_seconds.
func TestWriteSummarySVGParameterServers(t *testing.T) {
	series := func(rank int, name string, v float64) metrics.Series {
		s := metrics.Series{Rank: rank, Kind: metrics.Runtime, Name: name}
		for k := int64(1); k <= 20; k++ {
			s.Steps, s.Values = append(s.Steps, k), append(s.Values, v*float64(k%5+1))
		}
		return s
	}
	snap := metrics.Snapshot{Job: "psminimal -np 2", Series: []metrics.Series{
		series(1, "ps/step_seconds", 0.01), series(2, "ps/step_seconds", 0.02),
		series(1, "ps/staleness", 1), series(2, "ps/staleness", 2),
		series(11, "ps/server_step", 3), series(12, "ps/server_step", 3),
		series(11, "ps/server_bytes_in", 1<<20),
		series(11, "ps/server_push_staleness/10", 1), series(11, "ps/server_push_staleness/2", 1),
		series(12, "ps/server_push_staleness/2", 2),
	}}
	var buf bytes.Buffer
	if err := WriteSummarySVG(&buf, snap); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if err := xml.Unmarshal(buf.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	at := func(s string) int {
		i := strings.Index(out, ">"+s+"<")
		if i < 0 {
			t.Errorf("summary has no chart titled %q", s)
		}
		return i
	}
	at("ps/server_step")
	at("ps/server_bytes_in")
	at("ps/staleness")
	at("step time per rank (min, median, max of ps/step_seconds)")
	if two, ten := at("ps/server_push_staleness/2"), at("ps/server_push_staleness/10"); two > ten {
		t.Error("worker 10's staleness is charted before worker 2's")
	}
	if n := strings.Count(out, `class="line"`); n != 8 {
		t.Errorf("%d lines, want 8 (2 ps/staleness, 2 ps/server_step, 1 bytes in, 1 + 2 push staleness)", n)
	}
	if n := strings.Count(out, `class="spread"`); n != 2 {
		t.Errorf("%d step-time bars, want 2 (the workers)", n)
	}
}
