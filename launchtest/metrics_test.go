package launchtest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMetricsDir: gorun --metrics-dir leaves metrics.jsonl with every
// step's scalars of both ranks of a job, their runtime series and the
// ranks' exits, each line a JSON object.
func TestMetricsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	r := run(t, command(context.Background(), nil, bin(t, "gorun"), "-np", "2", "--metrics-dir", dir, bin(t, "metricsrank")))
	mustSucceed(t, "gorun --metrics-dir", r)
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type line struct {
		Rank  int     `json:"rank"`
		Host  string  `json:"host"`
		Step  int64   `json:"step"`
		Kind  string  `json:"kind"`
		Name  string  `json:"name"`
		Value float64 `json:"value"`
		Event *struct {
			Rank int    `json:"rank"`
			Kind string `json:"kind"`
		} `json:"event"`
	}
	loss := map[int]map[int64]float64{0: {}, 1: {}}
	last := map[int]map[string]line{0: {}, 1: {}}
	exits := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
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
		case l.Kind == "runtime":
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
		for _, name := range []string{"hvd/step_seconds", "hvd/comm_share", "hvd/link_sent_bytes/" + string(rune('1'-rank))} {
			if _, ok := last[rank][name]; !ok {
				t.Errorf("rank %d: no %s", rank, name)
			}
		}
		if !exits[rank] {
			t.Errorf("rank %d: no exit event", rank)
		}
	}
}
