package collective_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// logBuffer collects log output from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stallEngines starts n engines with short stall times; rank 0 logs into
// the returned buffer.
func stallEngines(t *testing.T, n int, warn, shutdown time.Duration) ([]*collective.Engine, []*collective.Comm, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cs := newComms(t, memMesh, n, collective.Options{})
	es := make([]*collective.Engine, n)
	for r, c := range cs {
		cfg := testConfig()
		cfg.StallWarning, cfg.StallShutdown = warn, shutdown
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("rank", r)
		es[r] = collective.NewEngine(c, cfg)
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
				onEngines(t, es, func(r int, e *collective.Engine) error {
					return waitAll([]*collective.Handle{
						e.Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
						e.Submit(allreduceReq("b", kernels.F32, kernels.Sum, 1), make([]byte, 4)),
					})
				})
			}
			const missing = "rank 0: [b]; rank 1: [b]; rank 2: [a]"
			onEngines(t, es, func(r int, e *collective.Engine) error {
				name := "a"
				if r == 2 {
					name = "b"
				}
				err := e.Submit(allreduceReq(name, kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(context.Background())
				if !errors.Is(err, collective.ErrStall) || !strings.Contains(err.Error(), missing) {
					return fmt.Errorf("got %v", err)
				}
				return nil
			})
			out := logs.String()
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=ERROR") || !strings.Contains(out, missing) || !strings.Contains(out, "uneven data") {
				t.Fatalf("no stall warning naming %q in:\n%s", missing, out)
			}
			if strings.Contains(out, "rank=1") || strings.Contains(out, "rank=2") {
				t.Fatalf("only rank 0 speaks for the job:\n%s", out)
			}
			for r, e := range es {
				if err := e.Submit(allreduceReq("c", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Err(); !errors.Is(err, collective.ErrStall) {
					t.Fatalf("rank %d after the stall: %v", r, err)
				}
			}
		})
	}
}

// TestEngineWatchdog: rank 1 submits nothing at all, so rank 0's
// negotiation waits for it; rank 0 warns and, after the shutdown time,
// fails the job.
func TestEngineWatchdog(t *testing.T) {
	es, _, logs := stallEngines(t, 2, 40*time.Millisecond, 150*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := es[0].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx)
	if !errors.Is(err, collective.ErrStall) || !strings.Contains(err.Error(), "rank 0 waited") {
		t.Fatalf("rank 0: %v", err)
	}
	if !strings.Contains(logs.String(), "negotiation is waiting for ranks that have submitted nothing") {
		t.Fatalf("no warning:\n%s", logs)
	}
	if err := es[1].Submit(allreduceReq("a", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx); err == nil {
		t.Fatal("rank 1's later operation succeeded after the job failed")
	}
}
