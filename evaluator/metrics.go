package evaluator

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/internal/metricpush"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// MetricPrefix starts the names of the scalars that Run publishes to gorun
// for each evaluation ("eval/test_loss" for Eval's "test_loss").
const MetricPrefix = "eval/"

// gorunMetrics returns the sender of the evaluator's metrics to gorun
// (gorun --evaluator with --metrics-dir or --dashboard sets
// jobenv.EnvMetricsAddr and EnvMetricsRank), and the function that closes
// it; nil, and a function that does nothing, elsewhere.
func gorunMetrics(ctx context.Context, log *slog.Logger) (*metricpush.Pusher, func()) {
	addr := os.Getenv(jobenv.EnvMetricsAddr)
	rank, err := strconv.Atoi(os.Getenv(jobenv.EnvMetricsRank))
	if addr == "" || err != nil || rank < 0 {
		return nil, func() {}
	}
	task, ok, err := jobenv.DetectTask(os.Getenv)
	if err != nil || !ok || len(task.Env.Secret) == 0 {
		log.Warn("evaluator: no metrics to gorun: the evaluator's environment has no job secret", "err", err)
		return nil, func() {}
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := rendezvous.Dial(dctx, addr, task.Env.Secret, rendezvous.WithLogger(log), rendezvous.WithTLS(task.Env.TLS))
	if err != nil {
		log.Warn("evaluator: no metrics to gorun", "addr", addr, "err", err)
		return nil, func() {}
	}
	p := metricpush.New(c, rank, log)
	return p, func() {
		p.Close()
		c.Close()
	}
}

// publish sends res's metrics to gorun as scalars at its step.
func publish(p *metricpush.Pusher, res *Result) {
	if p == nil {
		return
	}
	m := make(map[string]float64, len(res.Metrics)+1)
	for name, v := range res.Metrics {
		m[MetricPrefix+name] = v
	}
	m[MetricPrefix+"seconds"] = res.Seconds
	p.Log(res.Step, m)
}
