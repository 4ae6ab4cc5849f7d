package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

func TestMetricsReceiverAndRankStates(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.NP, cfg.Command, cfg.MetricsDir = 3, []string{"/x/train"}, dir
	st, err := NewMetricsStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j := &job{cfg: cfg, slots: make([]Slot, 3), metrics: st}
	j.rankStarted(0, "a")
	j.rankStarted(1, "b")
	j.rankStarted(2, "b")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	metricsReceiver(st)(1, []rendezvous.MetricPoint{{Step: 5, Time: at.UnixNano(), Name: "loss", Value: 0.5},
		{Step: 5, Time: at.UnixNano(), Name: "hvd/step", Value: 5, Runtime: true},
		{Step: 5, Time: at.UnixNano(), Name: "stall", Text: "engine: stalled tensors; missing: rank 0: [grad]"},
		{Step: 6, Time: at.UnixNano(), Name: "loss", Value: 0.4}})
	j.rankEnded(0, nil)
	j.rankEnded(1, &ExitError{Rank: 1, Host: "b", Status: 3})
	j.failure = errors.New("rank 1 failed")
	j.rankEnded(2, &ExitError{Rank: 2, Host: "b", Status: -1, Signal: "SIGTERM"})
	snap := st.Snapshot()
	if snap.Job != "train -np 3" {
		t.Errorf("job label %q", snap.Job)
	}
	want := map[int]string{0: "exited", 1: "failed", 2: "killed"}
	for _, ri := range snap.Ranks {
		if ri.State != want[ri.Rank] {
			t.Errorf("rank %d: state %q, want %q", ri.Rank, ri.State, want[ri.Rank])
		}
	}
	if snap.Ranks[1].Host != "b" || snap.Ranks[1].Step != 5 {
		t.Errorf("rank 1: %+v", snap.Ranks[1])
	}
	var kinds []string
	for _, e := range snap.Events {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, ",") != "stall,exit,failure,exit" || snap.Events[0].Rank != 1 || !snap.Events[0].Time.Equal(at) ||
		snap.Events[0].Text != "engine: stalled tensors; missing: rank 0: [grad]" {
		t.Errorf("events %v", snap.Events)
	}
	if metricsReceiver(nil) != nil {
		t.Error("a receiver without a store")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"rank":1,"host":"b","step":5,"time":"2026-01-01T00:00:00Z","kind":"scalar","name":"loss","value":0.5`) ||
		!strings.Contains(string(b), `"step":6,`) || !strings.Contains(string(b), `"kind":"stall","text":"engine: stalled tensors; missing: rank 0: [grad]"`) {
		t.Errorf("metrics.jsonl:\n%s", b)
	}
}

// TestEvaluatorMetricsEnv: with metrics kept (a Store), the
// evaluator is told where to send its results (the rendezvous, under the
// number after the last rank) and is a row "evaluator" of the Store;
// without, it is told nothing.
func TestEvaluatorMetricsEnv(t *testing.T) {
	for _, keep := range []bool{true, false} {
		f := newFakeSpawner(t)
		var logs testutil.SyncBuffer
		cfg := psConfig(t, f, &logs)
		cfg.Evaluator = true
		if keep {
			st, err := NewMetricsStore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cfg.Metrics = st
		}
		errc := launchAsync(t.Context(), cfg)
		f.waitSpawned(6)
		if keep {
			waitFor(t, "the evaluator's row", func() bool {
				for _, ri := range cfg.Metrics.Snapshot().Ranks {
					if ri.Rank == 5 && ri.State == "evaluator" {
						return true
					}
				}
				return false
			})
		}
		env := strings.Join(f.cmd(5).Env, "\n")
		hasAddr := strings.Contains(env, "\n"+jobenv.EnvMetricsAddr+"=127.0.0.1:")
		hasRank := strings.Contains(env, "\n"+jobenv.EnvMetricsRank+"=5\n") || strings.HasSuffix(env, "\n"+jobenv.EnvMetricsRank+"=5")
		if hasAddr != keep || hasRank != keep {
			t.Errorf("metrics kept %v: the evaluator's address %v, rank %v in\n%s", keep, hasAddr, hasRank, env)
		}
		for r := range 5 {
			if strings.Contains(strings.Join(f.cmd(r).Env, "\n"), jobenv.EnvMetricsAddr) {
				t.Errorf("rank %d is given %s", r, jobenv.EnvMetricsAddr)
			}
		}
		for r := range 6 {
			f.proc(r).exit(0)
		}
		if err := await(t, errc, 10*time.Second); err != nil {
			t.Fatalf("Launch = %v\n%s", err, logs.String())
		}
	}
}

// TestElasticEventsInStore: in an elastic job of 3 whose rank 0 fails,
// the Store records the failure and the re-formation of the 2 left; each
// worker is told its launch index as the number of its metrics.
func TestElasticEventsInStore(t *testing.T) {
	f := newFakeSpawner(t)
	var out, log lockedBuffer
	cfg := elasticConfig(t, f, "", 3, 2, &out, &log)
	st, err := NewMetricsStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg.Metrics = st
	errc := launchAsync(t.Context(), cfg)
	f.waitSpawned(3)
	for r := range 3 { // the number its metrics take: its launch index
		if env := f.cmd(r).Env; !slices.Contains(env, jobenv.EnvMetricsRank+"="+strconv.Itoa(r)) {
			t.Errorf("worker %d is not given %s=%d", r, jobenv.EnvMetricsRank, r)
		}
	}
	f.proc(0).exit(1)
	log.waitFor(t, "generation=2 size=2", 30*time.Second)
	f.proc(1).exit(0)
	f.proc(2).exit(0)
	if err := await(t, errc, 30*time.Second); err != nil {
		t.Fatalf("Launch: %v\n%s", err, log.String())
	}
	var failed, reformed bool
	for _, e := range st.Snapshot().Events {
		failed = failed || e.Kind == "failure" && e.Rank == 0
		reformed = reformed || e.Kind == "reformed" && e.Rank == -1 && strings.HasPrefix(e.Text, "generation 2: 2 ranks")
	}
	if !failed || !reformed {
		t.Errorf("events %+v: want rank 0's failure and the re-formation into generation 2", st.Snapshot().Events)
	}
}

// TestMetricsRoles: the rows of a parameter-server job (chief, workers,
// servers) and the evaluator get their roles in the Store, with the
// evaluator in its own state; an all-reduce job's rows get none.
func TestMetricsRoles(t *testing.T) {
	st := metrics.NewStore(metrics.Config{})
	defer st.Close()
	j := &job{cfg: Config{NP: 2, PS: 2, Evaluator: true}, slots: make([]Slot, 5), metrics: st}
	for rank := range 6 {
		j.rankStarted(rank, "h")
	}
	var got []string
	for _, r := range st.Snapshot().Ranks {
		got = append(got, r.Role+"/"+r.State)
	}
	want := "chief/running worker/running worker/running ps/running ps/running evaluator/evaluator"
	if strings.Join(got, " ") != want {
		t.Errorf("rows %q, want %q", strings.Join(got, " "), want)
	}
	ar := metrics.NewStore(metrics.Config{})
	defer ar.Close()
	j = &job{cfg: Config{NP: 2}, slots: make([]Slot, 2), metrics: ar}
	j.rankStarted(0, "h")
	j.rankStarted(1, "h")
	for _, r := range ar.Snapshot().Ranks {
		if r.Role != "" || r.State != "running" {
			t.Errorf("an all-reduce rank's row %+v", r)
		}
	}
}
