package dashboard

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/internal/testutil/browser"
)

// pageState is what the test reads of the page's DOM.
type pageState struct {
	Rows    int            `json:"rows"`
	Roles   []string       `json:"roles"` // each row's data-role and the role it shows, "role:shown"
	Points  map[string]int `json:"points"`
	Cells   int            `json:"cells"`
	Events  int            `json:"events"`
	Stall   string         `json:"stall"` // the text of the first stall event listed
	Updates int            `json:"updates"`
	Status  string         `json:"status"`
	Text    string         `json:"text"`
}

const readPage = `(() => {
  const st = document.getElementById('status');
  if (!st) return {points: {}};
  const points = {};
  for (const c of document.querySelectorAll('.chart[data-series]')) points[c.dataset.series] = +c.dataset.points;
  return {
    rows: document.querySelectorAll('#ranks tr[data-rank]').length,
    roles: [...document.querySelectorAll('#ranks tr[data-rank]')].map((tr) => tr.dataset.role + ':' + ((tr.querySelector('.role') || {}).textContent || '')),
    points: points,
    cells: document.querySelectorAll('#heatmap .cell[data-from][data-to]').length,
    events: document.querySelectorAll('#events li').length,
    stall: (document.querySelector('#events li.ev-stall') || {}).textContent || '',
    updates: +(document.body.dataset.updates || 0),
    status: st.dataset.state,
    text: st.textContent,
  };
})()`

// TestBrowser loads the page of a running job in headless Chromium,
// waits for its charts to fill, checks that they grow from the stream,
// ends the job, reloads, and saves a screenshot.
func TestBrowser(t *testing.T) {
	bin := browser.Find(t)
	const ranks = 4
	f := newFakeSource("browser np=4")
	s := serve(t, Config{Source: f, RequireToken: true})
	ctx, cancel := context.WithCancel(context.Background())
	fed := make(chan int64, 1)
	go func() { fed <- feed(ctx, f, ranks, 1, 50*time.Millisecond) }()
	stopFeed := func() {
		if cancel != nil {
			cancel()
			<-fed
			cancel = nil
		}
	}
	defer stopFeed()
	waitFor(t, "points", func() bool { return len(f.Snapshot().Series) > 0 })

	b := browser.Start(t, bin)
	// The token in the address: the page sets its cookie and drops it.
	if err := b.Navigate(s.URL()); err != nil {
		t.Fatal(err)
	}
	var p pageState
	read := func() pageState {
		t.Helper()
		var p pageState
		if err := b.Eval(readPage, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitFor(t, "the charts to have points from the stream", func() bool {
		p = read()
		return p.Points["loss"] > 0 && p.Updates > 0
	})
	if p.Rows != ranks {
		t.Errorf("%d rank rows, want %d", p.Rows, ranks)
	}
	for _, name := range []string{"loss", "accuracy", "hvd/allreduce_bytes", "hvd/busbw_gbps", "hvd/step_seconds"} {
		if p.Points[name] <= 0 {
			t.Errorf("no points in the chart of %s: %v", name, p.Points)
		}
	}
	if p.Cells != ranks*ranks {
		t.Errorf("%d heat map cells, want %d", p.Cells, ranks*ranks)
	}
	if p.Events == 0 {
		t.Error("no events listed")
	}
	if p.Status != "live" {
		t.Errorf("status %q, want live", p.Status)
	}
	first := p
	waitFor(t, "the loss chart to grow", func() bool {
		p = read()
		return p.Points["loss"] > first.Points["loss"] && p.Updates > first.Updates
	})

	// A stall warning (its text shown as text, never as markup), the
	// evaluator's row and a parameter server's, which have no place in
	// the heat map; the server's row shows its role.
	f.Add(metrics.Update{Ranks: []metrics.RankInfo{{Rank: ranks, Host: "node0", State: "evaluator", Role: "evaluator"},
		{Rank: ranks + 1, Host: "node1", State: "running", Role: "ps", Step: 42}},
		Events: []metrics.Event{{Time: time.Now(), Rank: 1, Kind: "stall", Text: "engine: stalled tensors <b>grad</b>"}}})
	waitFor(t, "the stall event, the evaluator's row and the server's", func() bool {
		p = read()
		return p.Stall != "" && p.Rows == ranks+2
	})
	if got := strings.Join(p.Roles[ranks:], ","); got != "evaluator:,ps:ps" {
		t.Errorf("the roles of the evaluator's and the server's rows: %q, want \"evaluator:,ps:ps\"", got)
	}
	if !strings.Contains(p.Stall, "rank 1: engine: stalled tensors <b>grad</b>") {
		t.Errorf("the stall event reads %q", p.Stall)
	}
	if p.Cells != ranks*ranks {
		t.Errorf("%d heat map cells with the evaluator's and the server's rows, want %d", p.Cells, ranks*ranks)
	}

	stopFeed()
	f.Add(metrics.Update{Ended: true, Events: []metrics.Event{{Time: time.Now(), Rank: -1, Kind: "exit", Text: "job done"}}})
	f.Close()
	waitFor(t, "the page to say the job ended", func() bool {
		p = read()
		return p.Status == "ended"
	})
	if p.Text != "job ended" {
		t.Errorf("status text %q", p.Text)
	}
	// Reloaded after the end, from the cookie: all still there.
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	want := len(f.Snapshot().Series[0].Steps) * ranks
	waitFor(t, "the reloaded page", func() bool {
		p = read()
		return p.Status == "ended" && p.Points["loss"] == want
	})
	if p.Rows != ranks+2 || p.Cells != ranks*ranks || p.Events == 0 || p.Stall == "" {
		t.Errorf("the ended job's page: %+v", p)
	}

	png, err := b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("GOROVOD_DASHBOARD_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
