package launchtest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jsonlLine is one line of metrics.jsonl: a point, or an event.
type jsonlLine struct {
	Rank  int     `json:"rank"`
	Host  string  `json:"host"`
	Step  int64   `json:"step"`
	Kind  string  `json:"kind"`
	Name  string  `json:"name"`
	Peer  *int    `json:"peer"`
	Value float64 `json:"value"`
	Event *struct {
		Rank int    `json:"rank"`
		Kind string `json:"kind"`
	} `json:"event"`
}

// TestMetricsDir: gorun --metrics-dir leaves metrics.jsonl with every
// step's scalars of both ranks of a job, their runtime series (the
// per-link ones with the peer in a field peer) and the ranks' exits, each
// line a JSON object.
func TestMetricsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	r := run(t, command(context.Background(), nil, bin(t, "gorun"), "-np", "2", "--metrics-dir", dir, bin(t, "metricsrank")))
	mustSucceed(t, "gorun --metrics-dir", r)
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	loss := map[int]map[int64]float64{0: {}, 1: {}}
	last := map[int]map[string]jsonlLine{0: {}, 1: {}}
	exits := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l jsonlLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case l.Event != nil:
			if l.Event.Kind == "exit" {
				exits[l.Event.Rank] = true
			}
		case l.Rank < 0 || l.Rank > 1 || l.Host == "":
			t.Errorf("line %q: rank or host wrong", sc.Text())
		case l.Kind == "scalar" && l.Name == "loss":
			loss[l.Rank][l.Step] = l.Value
		case l.Kind == "runtime" && l.Peer != nil:
			last[l.Rank][l.Name+" peer "+strconv.Itoa(*l.Peer)] = l
		case l.Kind == "runtime":
			if strings.HasPrefix(l.Name, "hvd/link_") {
				t.Errorf("line %q: a link series without a peer field", sc.Text())
			}
			last[l.Rank][l.Name] = l
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		for step := int64(1); step <= 50; step++ {
			if v, ok := loss[rank][step]; !ok || v != 1/float64(step) {
				t.Errorf("rank %d step %d: loss %v (present %t), want %v", rank, step, v, ok, 1/float64(step))
			}
		}
		if l := last[rank]["hvd/step"]; l.Value != 50 {
			t.Errorf("rank %d: last hvd/step %+v, want 50", rank, l)
		}
		if l := last[rank]["hvd/allreduce_bytes"]; l.Value != 50*4096*4 {
			t.Errorf("rank %d: hvd/allreduce_bytes %v, want %d", rank, l.Value, 50*4096*4)
		}
		for _, name := range []string{"hvd/step_seconds", "hvd/comm_share", "hvd/link_sent_bytes peer " + strconv.Itoa(1-rank), "hvd/link_recv_bytes peer " + strconv.Itoa(1-rank)} {
			if _, ok := last[rank][name]; !ok {
				t.Errorf("rank %d: no %s", rank, name)
			}
		}
		if !exits[rank] {
			t.Errorf("rank %d: no exit event", rank)
		}
	}
}

// TestPSServerMetrics: in a parameter-server job under gorun --ps 2 -np 2
// --metrics-dir, each server's own series reach gorun's store and so
// metrics.jsonl, under its rank (3 and 4): its step, the pushes and pulls
// it served (at least one push per step the chief counts done, every
// worker's step pushing to both servers), the bytes in and out, and the
// push staleness of each worker with the worker's rank in the field peer;
// summary.svg charts them and the workers' step times.
func TestPSServerMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	r := run(t, command(context.Background(), nil, append([]string{bin(t, "gorun"), "--ps", "2", "-np", "2", "--log-level", "warn", "--metrics-dir", dir},
		psMnist(t, "-epochs", "1")...)...))
	mustSucceed(t, "gorun --ps 2 -np 2 --metrics-dir", r)
	done := stepsDone(t, r.stdout)
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := map[int]map[string]jsonlLine{3: {}, 4: {}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l jsonlLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if !strings.HasPrefix(l.Name, "ps/server_") {
			continue
		}
		if l.Rank != 3 && l.Rank != 4 || l.Kind != "runtime" {
			t.Fatalf("line %q: a server's series under rank %d, kind %q", sc.Text(), l.Rank, l.Kind)
		}
		name := l.Name
		if l.Peer != nil {
			name += " peer " + strconv.Itoa(*l.Peer)
		}
		last[l.Rank][name] = l
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for rank, got := range last {
		step, pushes := got["ps/server_step"], got["ps/server_pushes"]
		if pushes.Value < float64(done) || step.Value != pushes.Value || step.Step != int64(step.Value) {
			t.Errorf("server rank %d: last ps/server_step %+v, ps/server_pushes %+v; want both the same, at least the %d steps done", rank, step, pushes, done)
		}
		for _, name := range []string{"ps/server_pulls", "ps/server_bytes_in", "ps/server_bytes_out"} {
			if got[name].Value <= 0 {
				t.Errorf("server rank %d: last %s %+v, want > 0", rank, name, got[name])
			}
		}
		for _, worker := range []int{1, 2} {
			if l, ok := got["ps/server_push_staleness peer "+strconv.Itoa(worker)]; !ok || l.Value < 0 {
				t.Errorf("server rank %d: push staleness of worker rank %d: %+v (present %t)", rank, worker, l, ok)
			}
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "summary.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"ps/server_step", "ps/server_bytes_in", "ps/server_push_staleness/1", "ps/server_push_staleness/2", "max of ps/step_seconds)"} {
		if !strings.Contains(string(svg), title+"<") {
			t.Errorf("summary.svg has no chart %q", title)
		}
	}
}
