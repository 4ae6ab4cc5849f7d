package evaluator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/internal/testutil"
)

// bound is how long a test waits for an event before it fails; it bounds
// failures only (events end the waits), so it is generous for a loaded
// machine.
const bound = 30 * time.Second

func checkpointAt(step int64) *hvd.Checkpoint {
	return &hvd.Checkpoint{Epoch: int(step / 10), Step: step, Params: map[string][]float64{"w": {float64(step)}}}
}

func write(t *testing.T, dir string, step int64) string {
	t.Helper()
	c := &hvd.Checkpointer{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := hvd.WriteCheckpoint(c.Path(step), checkpointAt(step)); err != nil {
		t.Fatal(err)
	}
	return c.Path(step)
}

// recorder is an Eval that records the steps it saw and checks that each
// checkpoint's content is its step's.
type recorder struct {
	mu    sync.Mutex
	steps []int64
	seen  chan int64 // each evaluated step, when not nil (buffered)
	delay func()     // before returning, when not nil
	fail  map[int64]error
}

func (r *recorder) eval(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) {
	if w := ck.Params["w"]; len(w) != 1 || w[0] != float64(ck.Step) {
		return nil, fmt.Errorf("checkpoint of step %d holds w = %v", ck.Step, w)
	}
	if r.delay != nil {
		r.delay()
	}
	if err := r.fail[ck.Step]; err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.steps = append(r.steps, ck.Step)
	r.mu.Unlock()
	if r.seen != nil {
		r.seen <- ck.Step
	}
	return map[string]float64{"w": ck.Params["w"][0], "half": float64(ck.Step) / 2}, nil
}

func (r *recorder) evaluated() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// scans counts Run's listings of the directory and lets a test wait for
// them.
type scans struct {
	n     atomic.Int64 // listings whose on call has returned
	calls int64        // listings begun; only Run's goroutine touches it
	tick  chan struct{}
	on    func(n int64) // called in Run's goroutine after listing n
}

func newScans() *scans { return &scans{tick: make(chan struct{}, 1)} }

func (s *scans) scanned() {
	s.calls++
	n := s.calls
	if s.on != nil {
		s.on(n) // before n is published, so waitFor sees what on recorded
	}
	s.n.Store(n)
	select {
	case s.tick <- struct{}{}:
	default:
	}
}

// waitFor waits until Run has listed the directory n times.
func (s *scans) waitFor(t *testing.T, n int64) {
	t.Helper()
	deadline := time.After(bound)
	for s.n.Load() < n {
		select {
		case <-s.tick:
		case <-deadline:
			t.Fatalf("Run listed the directory %d times in %v, want %d", s.n.Load(), bound, n)
		}
	}
}

func waitStep(t *testing.T, seen chan int64, want int64) {
	t.Helper()
	select {
	case got := <-seen:
		if got != want {
			t.Fatalf("evaluated step %d, want %d", got, want)
		}
	case <-time.After(bound):
		t.Fatalf("step %d not evaluated in %v", want, bound)
	}
}

// logs records log records: level, message and the step attribute.
type logs struct {
	mu   sync.Mutex
	recs []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "step" {
			s += fmt.Sprintf(" step=%v", a.Value)
		}
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, s)
	l.mu.Unlock()
	return nil
}

// count counts the records at level that mention all of words.
func (l *logs) count(level slog.Level, words ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.recs {
		if strings.HasPrefix(s, level.String()+" ") && !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(s, w) }) {
			n++
		}
	}
	return n
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

// syncBuffer is an Out that the test may read while Run writes.
type syncBuffer struct{ testutil.SyncBuffer }

func (s *syncBuffer) results(t *testing.T) []Result {
	t.Helper()
	var out []Result
	for line := range strings.Lines(s.String()) {
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

type outcome struct {
	sum Summary
	err error
}

// start runs Run in a goroutine; the test receives its outcome.
func start(ctx context.Context, o Options) chan outcome {
	done := make(chan outcome, 1)
	go func() {
		sum, err := Run(ctx, o)
		done <- outcome{sum, err}
	}()
	return done
}

func wait(t *testing.T, done chan outcome) outcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(bound):
		t.Fatalf("Run did not return in %v", bound)
		return outcome{}
	}
}

// TestEveryCheckpointOnceUnderConcurrentWrites: a training rank saves
// checkpoints through hvd.Checkpointer (the atomic write and prune path)
// at random small intervals, rewrites some steps already saved, and the
// evaluator, started before the directory exists and taking random time
// per evaluation, evaluates every step exactly once, in step order.
func TestEveryCheckpointOnceUnderConcurrentWrites(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "job", "ckpt")
	ckpts := &hvd.Checkpointer{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
	const n = 40
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex // rng
	pause := func(max time.Duration) {
		mu.Lock()
		d := time.Duration(rng.Int64N(int64(max)))
		mu.Unlock()
		time.Sleep(d) // jitter, not synchronization
	}
	rec := &recorder{delay: func() { pause(3 * time.Millisecond) }}
	sc := newScans()
	var dirAtFirstScan atomic.Value
	sc.on = func(k int64) {
		if k == 1 {
			_, err := os.Stat(dir)
			dirAtFirstScan.Store(err)
		}
	}
	out := &syncBuffer{}
	lg := &logs{}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	done := start(ctx, Options{Dir: dir, Eval: rec.eval, Out: out, Poll: 5 * time.Millisecond, FinalStep: 10 * n, Logger: slog.New(lg), scanned: sc.scanned})

	sc.waitFor(t, 1)
	if err, _ := dirAtFirstScan.Load().(error); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory existed at the first listing (%v); the test must start the evaluator first", err)
	}
	wrote := make(chan error, 1)
	go func() {
		for i := int64(1); i <= n; i++ {
			if err := ckpts.Save(rt, checkpointAt(10*i)); err != nil {
				wrote <- err
				return
			}
			if i%5 == 0 { // a rewrite of the step before: never evaluated twice
				if err := ckpts.Save(rt, checkpointAt(10*(i-1))); err != nil {
					wrote <- err
					return
				}
			}
			pause(2 * time.Millisecond)
		}
		wrote <- nil
	}()
	o := wait(t, done)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if o.err != nil || o.sum.Stopped != StopFinalStep {
		t.Fatalf("Run = %+v, %v; want the final step reached", o.sum, o.err)
	}
	var want []int64
	for i := int64(1); i <= n; i++ {
		want = append(want, 10*i)
	}
	if got := rec.evaluated(); !reflect.DeepEqual(got, want) {
		t.Fatalf("evaluated steps %v\nwant each once, in order: %v", got, want)
	}
	res := out.results(t)
	if len(res) != n || o.sum.Evaluations != n || o.sum.Skipped != 0 || o.sum.Last == nil || o.sum.Last.Step != 10*n {
		t.Fatalf("%d result lines, summary %+v; want %d evaluations, none skipped, the last at step %d", len(res), o.sum, n, 10*n)
	}
	for i, r := range res {
		if r.Step != want[i] || r.Metrics["w"] != float64(want[i]) {
			t.Errorf("result line %d = %+v, want step %d", i, r, want[i])
		}
	}
	if w := lg.count(slog.LevelWarn); w != 0 {
		t.Errorf("%d warnings:\n%s", w, lg.all())
	}
	if lg.count(slog.LevelInfo, "waiting for the checkpoint directory") != 1 {
		t.Errorf("no single INFO about waiting for the directory:\n%s", lg.all())
	}
}

// TestDamagedFilesSkippedAndRetriedWhenWhole: a checkpoint with a flipped
// byte and a truncated one are logged once each and passed over while
// later ones are evaluated; the first is evaluated once it is rewritten
// whole. Foreign and temporary files are ignored without a word.
func TestDamagedFilesSkippedAndRetriedWhenWhole(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 1)
	testutil.FlipBit(t, write(t, dir, 2), -3)
	testutil.TruncateHalf(t, write(t, dir, 3))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a checkpoint"), 0o644)
	os.WriteFile(filepath.Join(dir, ".checkpoint-123.tmp"), []byte("half a save"), 0o644)
	os.WriteFile(filepath.Join(dir, "checkpoint-000000000005.ckpt.bak"), []byte("x"), 0o644)

	rec := &recorder{seen: make(chan int64, 10)}
	sc := newScans()
	out := &syncBuffer{}
	lg := &logs{}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	done := start(ctx, Options{Dir: dir, Eval: rec.eval, Out: out, Poll: 2 * time.Millisecond, FinalStep: 4, Logger: slog.New(lg), scanned: sc.scanned})

	waitStep(t, rec.seen, 1)
	sc.waitFor(t, sc.n.Load()+4) // several listings with the damaged files unchanged
	write(t, dir, 2)             // rewritten whole
	waitStep(t, rec.seen, 2)
	write(t, dir, 4)
	waitStep(t, rec.seen, 4)
	o := wait(t, done)
	if o.err != nil || o.sum.Stopped != StopFinalStep || o.sum.Evaluations != 3 || o.sum.Skipped != 2 {
		t.Fatalf("Run = %+v, %v; want 3 evaluations, 2 skipped files, the final step reached", o.sum, o.err)
	}
	if got := rec.evaluated(); !reflect.DeepEqual(got, []int64{1, 2, 4}) {
		t.Errorf("evaluated %v, want [1 2 4]", got)
	}
	for _, step := range []string{"step=2", "step=3"} {
		if c := lg.count(slog.LevelWarn, "damaged", step); c != 1 {
			t.Errorf("%d warnings about the damaged %s, want 1:\n%s", c, step, lg.all())
		}
	}
	if w := lg.count(slog.LevelWarn); w != 2 {
		t.Errorf("%d warnings, want 2:\n%s", w, lg.all())
	}
	if len(out.results(t)) != 3 {
		t.Errorf("%d result lines, want 3", len(out.results(t)))
	}
}

// TestPrunedBeforeReadIsSkipped: a checkpoint removed between the listing
// and the read (Keep pruned it) is skipped with an INFO and the next one
// evaluated.
func TestPrunedBeforeReadIsSkipped(t *testing.T) {
	dir := t.TempDir()
	for s := int64(1); s <= 3; s++ {
		write(t, dir, s)
	}
	sc := newScans()
	sc.on = func(k int64) {
		if k == 1 {
			os.Remove((&hvd.Checkpointer{Dir: dir}).Path(1))
		}
	}
	rec := &recorder{}
	lg := &logs{}
	sum, err := Run(context.Background(), Options{Dir: dir, Eval: rec.eval, FinalStep: 3, Logger: slog.New(lg), scanned: sc.scanned})
	if err != nil || sum.Evaluations != 2 || sum.Skipped != 1 {
		t.Fatalf("Run = %+v, %v; want 2 evaluations, 1 skipped", sum, err)
	}
	if got := rec.evaluated(); !reflect.DeepEqual(got, []int64{2, 3}) {
		t.Errorf("evaluated %v, want [2 3]", got)
	}
	if lg.count(slog.LevelInfo, "removed before it was evaluated", "step=1") != 1 {
		t.Errorf("no INFO about the removed step 1:\n%s", lg.all())
	}
}

func TestFinalStepAndMaxEvaluationsStop(t *testing.T) {
	dir := t.TempDir()
	for s := int64(10); s <= 40; s += 10 {
		write(t, dir, s)
	}
	for _, tc := range []struct {
		final int64
		max   int
		want  []int64
		stop  Stop
	}{
		{final: 25, want: []int64{10, 20, 30}, stop: StopFinalStep},
		{final: 20, want: []int64{10, 20}, stop: StopFinalStep},
		{max: 2, want: []int64{10, 20}, stop: StopMaxEvaluations},
		{final: 40, max: 3, want: []int64{10, 20, 30}, stop: StopMaxEvaluations},
		{final: 40, max: 9, want: []int64{10, 20, 30, 40}, stop: StopFinalStep},
	} {
		rec := &recorder{}
		sum, err := Run(context.Background(), Options{Dir: dir, Eval: rec.eval, FinalStep: tc.final, MaxEvaluations: tc.max, Logger: slog.New(slog.DiscardHandler)})
		if err != nil || sum.Stopped != tc.stop || !reflect.DeepEqual(rec.evaluated(), tc.want) {
			t.Errorf("FinalStep %d, MaxEvaluations %d: evaluated %v, stopped %q, %v; want %v, %q", tc.final, tc.max, rec.evaluated(), sum.Stopped, err, tc.want, tc.stop)
		}
	}
}

// TestCancelStopsPromptly: ctx ending (a signal) ends a Run that waits for
// a checkpoint, with an hour's Poll, and a Run in the middle of an
// evaluation, each with a nil error; the interrupted evaluation is not
// counted or written.
func TestCancelStopsPromptly(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		sc := newScans()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &recorder{}
		done := start(ctx, Options{Dir: t.TempDir(), Eval: rec.eval, Poll: time.Hour, Logger: slog.New(slog.DiscardHandler), scanned: sc.scanned})
		sc.waitFor(t, 1)
		cancel()
		o := wait(t, done)
		if o.err != nil || o.sum.Stopped != StopCanceled || o.sum.Evaluations != 0 {
			t.Fatalf("Run = %+v, %v; want canceled, nothing evaluated", o.sum, o.err)
		}
	})
	t.Run("evaluating", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		eval := func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		out := &syncBuffer{}
		done := start(ctx, Options{Dir: dir, Eval: eval, Out: out, Logger: slog.New(slog.DiscardHandler)})
		select {
		case <-started:
		case <-time.After(bound):
			t.Fatal("Eval not called")
		}
		cancel()
		o := wait(t, done)
		if o.err != nil || o.sum.Stopped != StopCanceled || o.sum.Evaluations != 0 || o.sum.Last != nil || len(out.results(t)) != 0 {
			t.Fatalf("Run = %+v, %v, %d lines; want canceled, nothing evaluated or written", o.sum, o.err, len(out.results(t)))
		}
	})
}

func TestEvalErrorStops(t *testing.T) {
	dir := t.TempDir()
	for s := int64(1); s <= 3; s++ {
		write(t, dir, s)
	}
	bad := errors.New("the model does not fit")
	rec := &recorder{fail: map[int64]error{2: bad}}
	out := &syncBuffer{}
	sum, err := Run(context.Background(), Options{Dir: dir, Eval: rec.eval, Out: out, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), "step 2") || sum.Evaluations != 1 || sum.Stopped != "" {
		t.Fatalf("Run = %+v, %v; want an error naming step 2 after 1 evaluation", sum, err)
	}
	if res := out.results(t); len(res) != 1 || res[0].Step != 1 {
		t.Errorf("results %+v, want step 1 only", res)
	}
}

// TestJSONLines: each line is one JSON object with exactly the documented
// keys and values, non-finite metrics included.
func TestJSONLines(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 20)
	write(t, dir, 30)
	eval := func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) {
		if ck.Step == 20 {
			return map[string]float64{"loss": 0.25, "nan": math.NaN(), "up": math.Inf(1), "down": math.Inf(-1)}, nil
		}
		return nil, nil
	}
	out := &syncBuffer{}
	before := time.Now()
	sum, err := Run(context.Background(), Options{Dir: dir, Eval: eval, Out: out, MaxEvaluations: 2, Logger: slog.New(slog.DiscardHandler)})
	after := time.Now()
	if err != nil || sum.Evaluations != 2 {
		t.Fatalf("Run = %+v, %v", sum, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), out.String())
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[0]), &raw); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range raw {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"epoch", "file", "metrics", "seconds", "step", "time"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if got := string(raw["metrics"]); got != `{"down":"-Inf","loss":0.25,"nan":"NaN","up":"+Inf"}` {
		t.Errorf("metrics %s", got)
	}
	res := out.results(t)
	r := res[0]
	if r.Step != 20 || r.Epoch != 2 || r.File != "checkpoint-000000000020.ckpt" || r.Seconds < 0 || r.Time.Location() != time.UTC ||
		r.Time.Before(before.Truncate(0).Add(-time.Microsecond)) || r.Time.After(after) {
		t.Errorf("first line %+v (ran between %v and %v)", r, before, after)
	}
	if m := r.Metrics; len(m) != 4 || m["loss"] != 0.25 || !math.IsNaN(m["nan"]) || !math.IsInf(m["up"], 1) || !math.IsInf(m["down"], -1) {
		t.Errorf("metrics read back as %v", m)
	}
	if r := res[1]; r.Step != 30 || r.Epoch != 3 || r.Metrics == nil || len(r.Metrics) != 0 || !strings.Contains(lines[1], `"metrics":{}`) {
		t.Errorf("second line %s read as %+v; want step 30 and empty metrics", lines[1], r)
	}
	if !reflect.DeepEqual(*sum.Last, res[1]) {
		t.Errorf("Summary.Last %+v, the last line %+v", *sum.Last, res[1])
	}
}

func TestOptionsChecked(t *testing.T) {
	eval := func(context.Context, *hvd.Checkpoint) (map[string]float64, error) { return nil, nil }
	for _, o := range []Options{{Eval: eval}, {Dir: "d"}, {Dir: "d", Eval: eval, Poll: -1}, {Dir: "d", Eval: eval, FinalStep: -1}, {Dir: "d", Eval: eval, MaxEvaluations: -1}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) = nil error", o)
		}
	}
}

// TestHalfWrittenCopyEvaluatedWhenWhole: a checkpoint copied in place by a
// tool that does not rename (half of it there at first) is damaged until
// the copy ends, then evaluated once.
func TestHalfWrittenCopyEvaluatedWhenWhole(t *testing.T) {
	dir := t.TempDir()
	b, err := hvd.EncodeCheckpoint(checkpointAt(5))
	if err != nil {
		t.Fatal(err)
	}
	path := (&hvd.Checkpointer{Dir: dir}).Path(5)
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	sc := newScans()
	sc.on = func(k int64) {
		if k == 3 { // the copy ends after two listings of the half
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.Write(b[len(b)/2:])
				f.Close()
			}
			if err != nil {
				t.Error(err)
			}
		}
	}
	rec := &recorder{}
	lg := &logs{}
	sum, err := Run(context.Background(), Options{Dir: dir, Eval: rec.eval, Poll: time.Millisecond, FinalStep: 5, Logger: slog.New(lg), scanned: sc.scanned})
	if err != nil || sum.Evaluations != 1 || sum.Skipped != 1 || !reflect.DeepEqual(rec.evaluated(), []int64{5}) {
		t.Fatalf("Run = %+v, %v, evaluated %v; want step 5 once, 1 skipped", sum, err, rec.evaluated())
	}
	if w := lg.count(slog.LevelWarn, "damaged", "step=5"); w != 1 {
		t.Errorf("%d warnings about the half-written step 5, want 1:\n%s", w, lg.all())
	}
}
