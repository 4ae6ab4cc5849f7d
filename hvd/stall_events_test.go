package hvd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// TestStallWarningIsAnEvent: when rank 0 all-reduces "late" and rank 1
// submits nothing for longer than the stall warning time, a rank sends
// gorun an event of kind hvd.StallEvent naming the tensor, with the log
// level at error (the warning is not logged, the event is still sent);
// then rank 1 submits "late" too and both finish.
func TestStallWarningIsAnEvent(t *testing.T) {
	events := make(chan rendezvous.MetricPoint, 16)
	rts, _ := metricsJob(t, 2, eventsTo(events, func(string) bool { return true }), func(cfg *hvd.Config) {
		cfg.StallWarning, cfg.StallShutdown, cfg.OpTimeout = 100*time.Millisecond, 0, time.Minute
		cfg.LogLevel = "error"
	})
	var got rendezvous.MetricPoint
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		if r == 1 {
			select {
			case got = <-events:
			case <-time.After(30 * time.Second):
				t.Error("no stall event within 30s")
			}
		}
		return rt.Allreduce(context.Background(), hvd.NewTensor("late", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	})
	t.Logf("event: %s: %s", got.Name, got.Text)
	if got.Name != hvd.StallEvent || !strings.Contains(got.Text, "late") || !strings.HasPrefix(got.Text, "engine: ") || got.Time == 0 {
		t.Errorf("event %+v, want a stall naming the tensor \"late\"", got)
	}
}

// TestStalledTensorsIsAnEvent: rank 0 submits "a" and rank 1 "b", both
// negotiating; rank 0's stall inspector warns that each waits for the
// other rank, and that warning reaches gorun as a stall event naming
// the missing ranks; then each submits the other's and all complete.
func TestStalledTensorsIsAnEvent(t *testing.T) {
	events := make(chan rendezvous.MetricPoint, 64)
	rts, _ := metricsJob(t, 2, eventsTo(events, func(text string) bool { return strings.Contains(text, "stalled tensors") }), func(cfg *hvd.Config) {
		cfg.StallWarning, cfg.StallShutdown, cfg.OpTimeout = 100*time.Millisecond, 0, time.Minute
	})
	first := []string{"a", "b"}
	handles := make([]*hvd.Handle, 2)
	for r, rt := range rts {
		handles[r] = rt.AllreduceAsync(hvd.NewTensor(first[r], []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	}
	var got rendezvous.MetricPoint
	select {
	case got = <-events:
	case <-time.After(30 * time.Second):
		t.Fatal("no stalled-tensors event within 30s")
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		if err := rt.Allreduce(context.Background(), hvd.NewTensor(first[1-r], []float32{1}), kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		return handles[r].Wait(context.Background())
	})
	t.Logf("event: %s", got.Text)
	if got.Name != hvd.StallEvent || !strings.Contains(got.Text, "missing: rank 0: [b]; rank 1: [a]") {
		t.Errorf("event %+v, want a stall naming what each rank misses", got)
	}
}

// TestProcessSetStallIsAnEvent: in a job of 3 ranks with the set {0, 1},
// rank 0 all-reduces "late" on the set while rank 1 submits nothing to
// it for longer than the stall warning time; a stall event naming the
// set and the tensor reaches gorun, then rank 1 submits and both finish.
func TestProcessSetStallIsAnEvent(t *testing.T) {
	events := make(chan rendezvous.MetricPoint, 16)
	rts, _ := metricsJob(t, 3, eventsTo(events, func(text string) bool { return strings.HasPrefix(text, "process set ") }), func(cfg *hvd.Config) {
		cfg.StallWarning, cfg.StallShutdown, cfg.OpTimeout = 100*time.Millisecond, 0, time.Minute
		cfg.LogLevel = "error"
	})
	var got rendezvous.MetricPoint
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		set, err := rt.AddProcessSet(context.Background(), []int{0, 1})
		if err != nil || r == 2 {
			return err
		}
		if r == 1 {
			select {
			case got = <-events:
			case <-time.After(30 * time.Second):
				t.Error("no stall event of the set within 30s")
			}
		}
		return set.Allreduce(context.Background(), hvd.NewTensor("late", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	})
	t.Logf("event: %s: %s", got.Name, got.Text)
	if got.Name != hvd.StallEvent || !strings.Contains(got.Text, "late") || !strings.HasPrefix(got.Text, "process set 1 (job ranks [0 1]; ") || !strings.Contains(got.Text, ": engine: negotiation is waiting") {
		t.Errorf("event %+v, want a stall of the set naming the tensor \"late\"", got)
	}
}

// eventsTo is an OnMetrics that passes the events (points with a Text)
// for which match is true to events, dropping them when it is full.
func eventsTo(events chan<- rendezvous.MetricPoint, match func(text string) bool) func(int, []rendezvous.MetricPoint) {
	return func(_ int, points []rendezvous.MetricPoint) {
		for _, p := range points {
			if p.Text != "" && match(p.Text) {
				select {
				case events <- p:
				default:
				}
			}
		}
	}
}
