package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/kernels"
)

// stallEngines starts n engines with short stall times; they log into
// the returned buffer, and their Config.OnStall writes a line there too:
// "onstall rank=R kind=\"K\": text".
func stallEngines(t *testing.T, n int, warn, shutdown time.Duration) ([]*engine.Engine, []*collective.Comm, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
	es := make([]*engine.Engine, n)
	for r, c := range cs {
		cfg := testConfig()
		cfg.StallWarning, cfg.StallShutdown = warn, shutdown
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("rank", r)
		cfg.OnStall = func(s engine.Stall) {
			fmt.Fprintf(logs, "onstall rank=%d kind=%q: %s\n", r, s.Kind, s.Text)
		}
		es[r] = engine.New(c, cfg)
	}
	t.Cleanup(func() {
		for _, e := range es {
			e.Shutdown()
		}
	})
	return es, cs, logs
}

// TestEngineStall: ranks 0 and 1 submit "a", rank 2 submits "b". Rank 0
// warns which ranks miss which names; after the shutdown time every rank's
// operation fails with ErrStall and the same story. With cached names the
// hits are sent uncached after a while so that the table can tell.
func TestEngineStall(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprint("cached=", cached), func(t *testing.T) {
			es, _, logs := stallEngines(t, 3, 60*time.Millisecond, 400*time.Millisecond)
			if cached {
				onEngines(t, es, func(r int, e *engine.Engine) error {
					return waitAll([]*engine.Handle{
						e.Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
						e.Submit(allreduceReq("b", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
					})
				})
			}
			const missing = "rank 0: [b]; rank 1: [b]; rank 2: [a]"
			onEngines(t, es, func(r int, e *engine.Engine) error {
				name := "a"
				if r == 2 {
					name = "b"
				}
				err := e.Submit(allreduceReq(name, kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(context.Background())
				if !errors.Is(err, engine.ErrStall) || !strings.Contains(err.Error(), missing) {
					return fmt.Errorf("got %v", err)
				}
				return nil
			})
			out := logs.String()
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=ERROR") || !strings.Contains(out, missing) || !strings.Contains(out, "uneven data") {
				t.Fatalf("no stall warning naming %q in:\n%s", missing, out)
			}
			for _, want := range []string{`onstall rank=0 kind="stalled tensors": engine: stalled tensors: some ranks submitted tensors that other ranks have not; tensors: `,
				"; missing: " + missing + ";", `onstall rank=0 kind="stall shutdown": engine: stalled tensors: shutting down; err: `} {
				if !strings.Contains(out, want) {
					t.Fatalf("OnStall was not told %q:\n%s", want, out)
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "stalled tensors") && !strings.Contains(line, "rank=0") {
					t.Fatalf("only rank 0 speaks for the job:\n%s", out)
				}
			}
			for r, e := range es {
				if err := e.Submit(allreduceReq("c", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Err(); !errors.Is(err, engine.ErrStall) {
					t.Fatalf("rank %d after the stall: %v", r, err)
				}
			}
		})
	}
}

// TestEngineWatchdog: rank 1 submits nothing at all, so rank 0's
// negotiation waits for it; rank 0 warns naming rank 1 and, after the
// shutdown time, fails the job naming it too.
func TestEngineWatchdog(t *testing.T) {
	es, _, logs := stallEngines(t, 2, 40*time.Millisecond, 150*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := es[0].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx)
	if !errors.Is(err, engine.ErrStall) || !strings.Contains(err.Error(), "no answer from rank 1") {
		t.Fatalf("rank 0: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "negotiation is waiting for ranks that have submitted nothing") || !strings.Contains(out, `missing="rank 1"`) {
		t.Fatalf("no warning naming rank 1:\n%s", out)
	}
	if out := logs.String(); !strings.Contains(out, `onstall rank=0 kind="negotiation waiting": engine: negotiation is waiting for ranks that have submitted nothing (or are stopped); missing: rank 1; waited: `) {
		t.Fatalf("OnStall was not told of the wait for rank 1:\n%s", out)
	}
	if err := es[1].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx); err == nil {
		t.Fatal("rank 1's later operation succeeded after the job failed")
	}
}

// fakeClock is an injected clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logRecord is one captured log line: its level, message and attributes
// (those of the logger included) as strings.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// captureHandler is a slog.Handler that sends every record to a channel.
type captureHandler struct {
	ch    chan<- logRecord
	attrs []slog.Attr
}

// Enabled captures every level.
func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

// Handle sends the record, with the logger's attributes, to the channel.
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	select {
	case h.ch <- rec:
	default: // the test reads what it needs; never block the engine
	}
	return nil
}

// WithAttrs returns a handler that adds as to every record.
func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return captureHandler{ch: h.ch, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

// WithGroup ignores groups: the engine uses none.
func (h captureHandler) WithGroup(string) slog.Handler { return h }

// TestEngineStallWarningNamesSilentRank: of four ranks, 0, 2 and 3 submit
// "a" and "b" and rank 1 submits nothing, so its engine does not
// negotiate. Once the injected clock passes the stall warning time, rank
// 0, whose first exchange step waits for rank 1 alone, warns naming rank 1
// and the tensors waiting here; every other warning counts rank 1 among
// the ranks it may wait for. When rank 1 submits too, everything completes.
func TestEngineStallWarningNamesSilentRank(t *testing.T) {
	const n, silent = 4, 1
	clock := &fakeClock{t: time.Unix(1000, 0)}
	records := make(chan logRecord, 64)
	cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
	es := make([]*engine.Engine, n)
	for r, c := range cs {
		cfg := testConfig()
		cfg.StallWarning, cfg.StallShutdown, cfg.Now = 100*time.Millisecond, 0, clock.Now
		cfg.Logger = slog.New(captureHandler{ch: records}).With("rank", r)
		es[r] = engine.New(c, cfg)
	}
	t.Cleanup(func() {
		for _, e := range es {
			e.Shutdown()
		}
	})
	// "a" does not wake the engine, "b" does: the cycle that then begins
	// drains both (a cycle woken by "a" alone could start before "b" was
	// submitted, and on a loaded machine did).
	submit := func(r int) []*engine.Handle {
		return []*engine.Handle{
			es[r].SubmitDriven(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
			es[r].Submit(allreduceReq("b", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
		}
	}
	var hs []*engine.Handle
	for r := range n {
		if r != silent {
			hs = append(hs, submit(r)...)
		}
	}

	var warning *logRecord
	for deadline := time.Now().Add(10 * time.Second); warning == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no stall warning from rank 0 within 10s")
		}
		clock.Advance(time.Second) // the watchdog checks every 25ms of real time
		select {
		case rec := <-records:
			if !strings.Contains(rec.msg, "negotiation is waiting") {
				continue
			}
			if !strings.Contains(rec.attrs["missing"], fmt.Sprint(silent)) {
				t.Fatalf("a warning that does not count rank %d among the missing: %+v", silent, rec)
			}
			if rec.attrs["rank"] == "0" {
				warning = &rec
			}
		case <-time.After(25 * time.Millisecond):
		}
	}
	if warning.level != slog.LevelWarn || warning.attrs["missing"] != fmt.Sprintf("rank %d", silent) || warning.attrs["tensors"] != "[a b]" {
		t.Fatalf("rank 0's warning: %+v; want level WARN, missing=\"rank %d\", tensors=\"[a b]\"", *warning, silent)
	}
	hs = append(hs, submit(silent)...)
	if err := waitAll(hs); err != nil {
		t.Fatal(err)
	}
}

// TestEngineStallShutdownNamesSilentRank: of three ranks, 0 and 2 submit
// "a" and rank 1 nothing. After the stall shutdown time both fail with
// ErrStall, naming rank 1 and the tensor they wait with; rank 1's later
// submission fails too.
func TestEngineStallShutdownNamesSilentRank(t *testing.T) {
	es, _, _ := stallEngines(t, 3, 0, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs := []*engine.Handle{
		es[0].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
		es[2].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
	}
	for i, h := range hs {
		err := h.Wait(ctx)
		if !errors.Is(err, engine.ErrStall) || !strings.Contains(err.Error(), "no answer from rank 1") || !strings.Contains(err.Error(), "[a]") {
			t.Fatalf("rank %d: %v; want ErrStall naming rank 1 and [a]", 2*i, err)
		}
	}
	if err := es[1].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx); err == nil {
		t.Fatal("rank 1's later operation succeeded after the job failed")
	}
}

// TestEngineMismatchEndsAtOpTimeout: rank 0 submits "a" and rank 1 "b",
// each waiting without a deadline of its own, with OpTimeout 1 s and no
// stall shutdown time. Both engines keep negotiating, so no rank fails to
// answer; the names themselves wait on each other. Once they have waited
// OpTimeout, both operations fail with ErrStall and ErrTimeout, naming
// each tensor, the rank that submitted it and the rank that did not, and
// both engines are stopped. With cached names (a step of both first) the
// hits are sent uncached after half the OpTimeout so that the table can
// tell.
func TestEngineMismatchEndsAtOpTimeout(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprint("cached=", cached), func(t *testing.T) {
			cs := meshtest.Comms(t, meshtest.Mem, 2, collective.Options{})
			es := make([]*engine.Engine, 2)
			for r, c := range cs {
				cfg := testConfig()
				cfg.StallShutdown, cfg.OpTimeout = 0, time.Second
				cfg.Logger = slog.New(slog.DiscardHandler)
				es[r] = engine.New(c, cfg)
			}
			t.Cleanup(func() {
				for _, e := range es {
					e.Shutdown()
				}
			})
			names := []string{"a", "b"}
			if cached {
				onEngines(t, es, func(r int, e *engine.Engine) error {
					return waitAll([]*engine.Handle{
						e.Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
						e.Submit(allreduceReq("b", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
					})
				})
			}
			// The job may fail once the first of the two names has waited
			// OpTimeout: a rank that submitted later sees its own wait
			// end a little sooner, so the bound is from before either.
			start := time.Now()
			onEngines(t, es, func(r int, e *engine.Engine) error {
				err := e.Submit(allreduceReq(names[r], kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(context.Background())
				if waited := time.Since(start); waited < time.Second {
					return fmt.Errorf("failed %v after the first submission, before OpTimeout: %v", waited, err)
				}
				if !errors.Is(err, engine.ErrStall) || !errors.Is(err, collective.ErrTimeout) {
					return fmt.Errorf("got %v, want ErrStall and ErrTimeout", err)
				}
				for _, want := range []string{"operation timeout 1s", "a (submitted by rank 0)", "b (submitted by rank 1)", "missing ranks: rank 0: [b]; rank 1: [a]"} {
					if !strings.Contains(err.Error(), want) {
						return fmt.Errorf("error %q does not say %q", err, want)
					}
				}
				return nil
			})
			for r, e := range es {
				if err := e.Err(); !errors.Is(err, engine.ErrStall) {
					t.Fatalf("rank %d: engine cause %v, want ErrStall", r, err)
				}
				if err := e.Submit(allreduceReq("c", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Err(); !errors.Is(err, engine.ErrStall) {
					t.Fatalf("rank %d after the stall: %v", r, err)
				}
			}
		})
	}
}
