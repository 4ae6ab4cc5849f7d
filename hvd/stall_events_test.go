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
	rts, _ := metricsJob(t, 2, func(_ int, points []rendezvous.MetricPoint) {
		for _, p := range points {
			if p.Text != "" {
				select {
				case events <- p:
				default:
				}
			}
		}
	}, func(cfg *hvd.Config) {
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
