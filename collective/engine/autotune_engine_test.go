package engine

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// tuneRecorder keeps a rank's autotuning log records as text.
type tuneRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *tuneRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *tuneRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *tuneRecorder) WithGroup(string) slog.Handler            { return r }

func (r *tuneRecorder) Handle(_ context.Context, rec slog.Record) error {
	if !strings.HasPrefix(rec.Message, "engine: autotune:") {
		return nil
	}
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, b.String())
	r.mu.Unlock()
	return nil
}

// matching returns the records that start with prefix.
func (r *tuneRecorder) matching(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.recs {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestEngineAutotuneLockstep: four ranks on two hosts all-reduce named
// tensors, submitted in a different order on each rank, step after step,
// while rank 0's tuner changes the fusion threshold, the cycle time, the
// hierarchical switch and the cache underneath. Every result is right,
// every rank applies every setting in the same cycle, the search ends
// with the chosen setting in effect everywhere, and rank 0's CSV log has
// a row per trial and the choice.
func TestEngineAutotuneLockstep(t *testing.T) {
	for _, tr := range meshtest.Kinds()[:2] {
		t.Run(tr.Name, func(t *testing.T) {
			const size, steps = 4, 120
			cs := meshtest.Comms(t, tr.Make, size, collective.Options{Hosts: []int{0, 0, 1, 1}})
			var csvLog bytes.Buffer
			es, recs := tunedEngines(cs, &csvLog)
			errs := make([]error, size)
			var wg sync.WaitGroup
			for r, e := range es {
				wg.Go(func() { errs[r] = tunedSteps(r, size, e, steps) })
			}
			wg.Wait()
			for _, e := range es {
				wg.Go(e.Shutdown)
			}
			wg.Wait()
			meshtest.MustAll(t, errs)

			applied := recs[0].matching("engine: autotune: applying")
			for r, rec := range recs[1:] {
				if got := rec.matching("engine: autotune: applying"); !slices.Equal(got, applied) {
					t.Fatalf("rank %d applied\n%s\nrank 0 applied\n%s", r+1, strings.Join(got, "\n"), strings.Join(applied, "\n"))
				}
			}
			chose := recs[0].matching("engine: autotune: chose")
			if len(chose) != 1 {
				t.Fatalf("rank 0 logged %d choices, want 1; applied:\n%s", len(chose), strings.Join(applied, "\n"))
			}
			rows := tuneLogRows(t, csvLog.Bytes())
			checkTuneRows(t, rows, applied, chose[0])
			t.Logf("%s; %d settings applied", chose[0], len(applied))
		})
	}
}

// tunedEngines starts an autotuning engine with a short plan on each of
// cs, logging to a recorder per rank (and rank 0's trials to csvLog, if
// set).
func tunedEngines(cs []*collective.Comm, csvLog io.Writer) ([]*Engine, []*tuneRecorder) {
	recs := make([]*tuneRecorder, len(cs))
	es := make([]*Engine, len(cs))
	for r, c := range cs {
		cfg := DefaultConfig()
		cfg.CycleTime, cfg.Autotune, cfg.AutotuneLog = 200*time.Microsecond, true, csvLog
		cfg.tunePlan = func(p *tunePlan) { p.warmup, p.settle, p.steps = 1, 1, 2 }
		recs[r] = &tuneRecorder{}
		cfg.Logger = slog.New(recs[r])
		es[r] = New(c, cfg)
	}
	return es, recs
}

// tunedSteps runs steps of all-reduces of named float32 tensors (small
// ones, and one past the inline size, which the hierarchical switch
// affects) submitted in a random order per rank, and checks each sum.
func tunedSteps(rank, size int, e *Engine, steps int) error {
	rng := rand.New(rand.NewPCG(uint64(rank), 11))
	lens := []int{1, 7, 100, 1000, 3000, 40000}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for step := range steps {
		hs := make([]*Handle, len(lens))
		bufs := make([][]float32, len(lens))
		for _, i := range rng.Perm(len(lens)) {
			bufs[i] = make([]float32, lens[i])
			for j := range bufs[i] {
				bufs[i][j] = float32(rank + j%5 + step%3)
			}
			req := Request{Name: fmt.Sprintf("t%d", i), Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: []int{lens[i]}}
			hs[i] = e.Submit(req, unsafe.Slice((*byte)(unsafe.Pointer(&bufs[i][0])), 4*lens[i]))
		}
		for i, h := range hs {
			if err := h.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d step %d: %w", rank, step, err)
			}
			for j, got := range bufs[i] {
				if want := float32(size*(size-1)/2 + size*(j%5+step%3)); got != want {
					return fmt.Errorf("rank %d step %d: t%d[%d] = %v, want %v", rank, step, i, j, got, want)
				}
			}
		}
	}
	return nil
}

// tuneLogRows parses the CSV log.
func tuneLogRows(t *testing.T, b []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("autotune log: %v\n%s", err, b)
	}
	return rows
}

// checkTuneRows checks the log of the default search over a layout of two
// hosts from a cycle time of 200µs, off the grid: the header, 13 trials in
// order (the base, 4 more thresholds, 5 cycle times, the hierarchical
// switch on and off, the cache off), and the chosen setting, the same as one of the
// trials and as the one that the last setting applied left in effect.
func checkTuneRows(t *testing.T, rows [][]string, applied []string, chose string) {
	t.Helper()
	const trials = 1 + 4 + 5 + 2 + 1
	if len(rows) != 1+trials+1 || !slices.Equal(rows[0], tuneLogHeader) {
		t.Fatalf("autotune log has %d rows, want the header, %d trials and the choice:\n%v", len(rows), trials, rows)
	}
	hier := map[string]bool{}
	found := false
	last := rows[trials+1]
	for i, row := range rows[1 : trials+1] {
		if row[0] != fmt.Sprint(i) {
			t.Errorf("row %d: trial %q", i+1, row[0])
		}
		hier[row[3]] = true
		found = found || slices.Equal(row[1:], last[1:])
	}
	if !hier["on"] || !hier["off"] || rows[trials][4] != "off" {
		t.Errorf("the trials did not try the hierarchical switch and the cache off:\n%v", rows)
	}
	if last[0] != "chosen" || !found {
		t.Errorf("last row %v, want the choice, one of the trials:\n%v", last, rows)
	}
	inEffect := "fusion 64 MiB, cycle 200µs, hierarchical auto, cache on"
	if n := len(applied); n > 0 {
		_, inEffect, _ = strings.Cut(applied[n-1], "setting=")
	}
	chosen, _, _ := strings.Cut(strings.TrimPrefix(chose, "engine: autotune: chose "), " trial=")
	if inEffect != chosen {
		t.Errorf("in effect after tuning: %s; chosen: %s", inEffect, chosen)
	}
}

// TestEngineAutotuneEarly: a job whose steps are one small all-reduce
// each, which completes within the negotiation exchange (Stats.Early),
// still gives the tuner its steps: the search ends with a choice.
func TestEngineAutotuneEarly(t *testing.T) {
	const size, steps = 2, 300
	es, recs := tunedEngines(meshtest.Comms(t, meshtest.Mem, size, collective.Options{}), nil)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r, e := range es {
		wg.Go(func() {
			for s := range steps {
				buf := []float32{float32(r + s)}
				req := Request{Name: "metric", Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: []int{1}}
				if err := e.SubmitDriven(req, unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4)).Wait(context.Background()); err != nil {
					errs[r] = err
					return
				}
				if want := float32(2*s + 1); buf[0] != want {
					errs[r] = fmt.Errorf("step %d: %v, want %v", s, buf[0], want)
					return
				}
			}
		})
	}
	wg.Wait()
	var early uint64
	for _, e := range es {
		early += e.Stats().Early
		wg.Go(e.Shutdown)
	}
	wg.Wait()
	meshtest.MustAll(t, errs)
	if early == 0 {
		t.Fatal("no all-reduce completed early")
	}
	if chose := recs[0].matching("engine: autotune: chose"); len(chose) != 1 {
		t.Fatalf("rank 0 logged %d choices after %d one-tensor steps (%d early), want 1", len(chose), steps, early)
	}
}
