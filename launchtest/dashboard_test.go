package launchtest

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/internal/testutil/browser"
)

// dashSteps is how many steps the dashboard's mnist job trains: with the
// CNN on one thread per rank, some 15 s on an idle machine, so that the
// page sees it run for a while.
const dashSteps = 400

// dashPage is what TestDashboard reads of the page's DOM.
type dashPage struct {
	Rows      int            `json:"rows"`
	States    []string       `json:"states"`
	Points    map[string]int `json:"points"`
	Cells     int            `json:"cells"`
	LinkCells int            `json:"linkCells"` // cells from one rank to another with bytes
	Status    string         `json:"status"`
	Text      string         `json:"text"`
}

const readDashPage = `(() => {
  const st = document.getElementById('status');
  if (!st) return {points: {}, states: []};
  const points = {};
  for (const c of document.querySelectorAll('.chart[data-series]')) points[c.dataset.series] = +c.dataset.points;
  const cells = [...document.querySelectorAll('#heatmap .cell[data-from][data-to]')];
  return {
    rows: document.querySelectorAll('#ranks tr[data-rank]').length,
    states: [...document.querySelectorAll('#ranks tr[data-rank]')].map((tr) => tr.dataset.state),
    points: points,
    cells: cells.length,
    linkCells: cells.filter((c) => c.dataset.from !== c.dataset.to && +c.dataset.bytes > 0).length,
    status: st.dataset.state,
    text: st.textContent,
  };
})()`

// TestDashboard: gorun --dashboard serves the page of a running 2-rank
// mnist job; headless Chromium shows its ranks, charts that grow and the
// link heat map, /metrics has every rank's series, and after the job the
// page reloads with everything still there until the linger is cut short
// by SIGINT, with gorun's status 0. The screenshot of the whole page goes
// to $GOROVOD_DASHBOARD_SCREENSHOT if set, and a copy of the job's
// summary.svg to $GOROVOD_DASHBOARD_SUMMARY (README's docs/dashboard.png
// and docs/summary.svg).
func TestDashboard(t *testing.T) {
	b := browser.Start(t, browser.Find(t)) // first: the slowest to come up
	dir := filepath.Join(t.TempDir(), "m")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := command(ctx, nil, bin(t, "gorun"), "-np", "2", "--dashboard", "127.0.0.1:0", "--dashboard-linger", "60s",
		"--metrics-dir", dir, bin(t, "mnist"), "-model", "cnn", "-threads", "1", "-epochs", "1",
		"-max-steps", strconv.Itoa(dashSteps), "-log-every", "100")
	var stdout, stderr testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default: // a failed test: the ranks die with gorun (parent-death signal)
			cmd.Process.Kill()
			<-exited
		}
	}()
	// alive fails t if gorun is gone before its time.
	alive := func() {
		t.Helper()
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("gorun ended early: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		default:
		}
	}

	// The address, with the port the kernel gave.
	urlLine := regexp.MustCompile(`gorun: dashboard at (http://127\.0\.0\.1:([0-9]+)/)\n`)
	var pageURL string
	poll(t, "gorun's dashboard address", time.Minute, func() bool {
		alive()
		m := urlLine.FindStringSubmatch(stderr.String())
		if m == nil {
			return false
		}
		if m[2] == "0" {
			t.Fatalf("gorun printed port 0: %s", m[0])
		}
		pageURL = m[1]
		return true
	})
	if err := b.Navigate(pageURL); err != nil {
		t.Fatal(err)
	}
	var p dashPage
	read := func() dashPage {
		t.Helper()
		var p dashPage
		if err := b.Eval(readDashPage, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Runtime series come every 250 ms; the link cells once both ranks
	// reported their traffic.
	poll(t, "the charts to have points", 2*time.Minute, func() bool {
		alive()
		p = read()
		return p.Rows == 2 && p.Points["loss"] > 0 && p.Points["hvd/allreduce_bytes"] > 0 && p.LinkCells == 2
	})
	if p.Status != "live" {
		t.Fatalf("status %q (%q) while the job runs, want live: the job ran too fast for this test? %+v", p.Status, p.Text, p)
	}
	if p.Cells != 4 {
		t.Errorf("%d heat map cells, want 2×2", p.Cells)
	}
	for _, name := range []string{"loss", "lr", "samples_per_second", "hvd/allreduce_bytes", "hvd/step_seconds", "hvd/comm_share"} {
		if _, ok := p.Points[name]; !ok {
			t.Errorf("no chart of %s: %v", name, p.Points)
		}
	}
	first := p
	poll(t, "the loss chart to grow", 2*time.Minute, func() bool {
		alive()
		p = read()
		return p.Points["loss"] > first.Points["loss"] && p.Points["hvd/allreduce_bytes"] > first.Points["hvd/allreduce_bytes"]
	})

	base := strings.TrimSuffix(pageURL, "/")
	running := scrape(t, base+"/metrics")
	for rank := range 2 {
		r := strconv.Itoa(rank)
		for _, name := range []string{"gorovod_rank_step", "gorovod_loss", "gorovod_lr", "gorovod_samples_per_second",
			"gorovod_hvd_allreduce_bytes", "gorovod_hvd_step_seconds"} {
			if v, ok := running.get(name, "rank", r); !ok || v <= 0 {
				t.Errorf("%s{rank=%q}: %v (present %t), want > 0", name, r, v, ok)
			}
		}
		// (hvd/comm_share may pass 1: overlapped time counts twice.)
		if _, ok := running.get("gorovod_rank_comm_share", "rank", r); !ok {
			t.Errorf("no gorovod_rank_comm_share{rank=%q}", r)
		}
		if v, ok := running.get("gorovod_rank_link_sent_bytes_total", "rank", r); !ok || v <= 0 {
			t.Errorf("gorovod_rank_link_sent_bytes_total{rank=%q}: %v (present %t), want > 0", r, v, ok)
		}
		if v, ok := running.get("gorovod_loss", "rank", r); ok && v > 10 {
			t.Errorf("loss of rank %d: %v, not that of a classifier of 10 classes learning", rank, v)
		}
	}

	// The end: the page says so by itself, and gorun lingers.
	poll(t, "the page to say the job ended", runTimeout, func() bool {
		alive()
		p = read()
		return p.Status == "ended"
	})
	if p.Text != "job ended" {
		t.Errorf("status text %q", p.Text)
	}
	poll(t, "gorun to linger", time.Minute, func() bool {
		alive()
		return strings.Contains(stderr.String(), "gorun: the job is over; the dashboard stays at "+pageURL+" for 1m0s")
	})
	ended := scrape(t, base+"/metrics")
	if v, ok := ended.get("gorovod_job_ended"); !ok || v != 1 {
		t.Errorf("gorovod_job_ended %v (present %t) after the job, want 1", v, ok)
	}
	for rank := range 2 {
		r := strconv.Itoa(rank)
		if v, ok := ended.get("gorovod_rank_step", "rank", r); v != dashSteps {
			t.Errorf("gorovod_rank_step{rank=%q} %v (present %t) after the job, want %d", r, v, ok, dashSteps)
		}
		if v, ok := ended.get("gorovod_rank_state", "rank", r, "state", "exited"); v != 1 {
			t.Errorf("gorovod_rank_state{rank=%q,state=\"exited\"} %v (present %t) after the job, want 1", r, v, ok)
		}
	}

	// Reloaded after the end: every step's loss of both ranks.
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	poll(t, "the reloaded page", 2*time.Minute, func() bool {
		alive()
		p = read()
		return p.Status == "ended" && p.Points["loss"] == 2*dashSteps
	})
	if p.Rows != 2 || p.Cells != 4 || p.LinkCells != 2 || strings.Join(p.States, ",") != "exited,exited" {
		t.Errorf("the ended job's page: %+v", p)
	}
	png, err := b.FullScreenshot()
	if err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("GOROVOD_DASHBOARD_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// The summary was written before gorun said it lingers.
	summary := filepath.Join(dir, "summary.svg")
	svgTexts(t, summary, "loss", "samples_per_second", "hvd/allreduce_bytes")
	if to := os.Getenv("GOROVOD_DASHBOARD_SUMMARY"); to != "" {
		b, err := os.ReadFile(summary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A signal ends the linger; the job itself succeeded.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("gorun after SIGINT in the linger: %v, want status 0\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gorun still lingers 30 s after SIGINT")
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("stopped after step %d", dashSteps)) {
		t.Errorf("mnist did not say it stopped after step %d:\n%s", dashSteps, stdout.String())
	}
	if resp, err := http.Get(pageURL); err == nil {
		resp.Body.Close()
		t.Error("the dashboard still answers after gorun exited")
	}
}

// poll calls cond every 100 ms until it holds, and fails t if it does not
// within d.
func poll(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

// promSample is one line of Prometheus's text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// promSamples is a scrape of /metrics.
type promSamples []promSample

// get returns the value of the sample named name whose labels include the
// pairs of kv (name, value, name, value…).
func (ps promSamples) get(name string, kv ...string) (float64, bool) {
next:
	for _, s := range ps {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if s.labels[kv[i]] != kv[i+1] {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

var (
	promLine  = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	promLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?`)
)

// scrape reads url in Prometheus's text format, failing t on a line that
// does not parse, a sample with no TYPE before it, or a value that is not
// a finite number of at least 0 (none of gorun's can be negative, nor can
// mnist's scalars).
func scrape(t *testing.T, url string) promSamples {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("%s: %s, %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	var ps promSamples
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			typed[f[2]] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := promLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: line %q does not parse", url, line)
		}
		s := promSample{name: m[1], labels: map[string]string{}}
		if rest := promLabel.ReplaceAllStringFunc(m[2], func(kv string) string {
			l := promLabel.FindStringSubmatch(kv)
			s.labels[l[1]] = l[2]
			return ""
		}); rest != "" {
			t.Fatalf("%s: labels %q do not parse", url, m[2])
		}
		if s.value, err = strconv.ParseFloat(m[3], 64); err != nil {
			t.Fatalf("%s: line %q: %v", url, line, err)
		}
		if !typed[s.name] {
			t.Errorf("%s: %s has no TYPE line before it", url, s.name)
		}
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) || s.value < 0 {
			t.Errorf("%s: %q: not a finite value ≥ 0", url, line)
		}
		ps = append(ps, s)
	}
	if len(ps) == 0 {
		t.Fatalf("%s: no samples:\n%s", url, body)
	}
	return ps
}

// svgTexts checks that path is well-formed XML with an <svg> root and that
// its text elements name every one of want.
func svgTexts(t *testing.T, path string, want ...string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	var root string
	var texts strings.Builder
	inText := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			if tok.Name.Local == "text" {
				inText++
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				inText--
			}
		case xml.CharData:
			if inText > 0 {
				texts.Write(tok)
				texts.WriteByte('\n')
			}
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", path, root)
	}
	for _, w := range want {
		if !strings.Contains(texts.String(), w) {
			t.Errorf("%s: no text names %q; the texts:\n%s", path, w, texts.String())
		}
	}
}
