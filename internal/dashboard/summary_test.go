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
