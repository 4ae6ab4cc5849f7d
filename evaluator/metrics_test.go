package evaluator

import (
	"context"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// TestMetricsToGorun: in the environment gorun --evaluator gives it while
// keeping metrics, Run sends each evaluation's metrics, prefixed "eval/",
// at the checkpoint's step under the rank gorun named, with the
// evaluation's time.
func TestMetricsToGorun(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(7 * i)
	}
	var mu sync.Mutex
	got := map[string]rendezvous.MetricPoint{}
	ranks := map[int]bool{}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 2, Hosts: make([]string, 2),
		OnMetrics: func(rank int, pts []rendezvous.MetricPoint) {
			mu.Lock()
			defer mu.Unlock()
			ranks[rank] = true
			for _, p := range pts {
				got[p.Name] = p
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	t.Setenv(jobenv.EnvRole, jobenv.RoleEvaluator)
	t.Setenv(jobenv.EnvSecret, hex.EncodeToString(secret))
	t.Setenv(jobenv.EnvMetricsAddr, srv.Addr())
	t.Setenv(jobenv.EnvMetricsRank, strconv.Itoa(2))
	dir := t.TempDir()
	write(t, dir, 40)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := Run(ctx, Options{Dir: dir, MaxEvaluations: 1, Poll: 10 * time.Millisecond,
		Eval: func(context.Context, *hvd.Checkpoint) (map[string]float64, error) {
			return map[string]float64{"test_loss": 0.125, "test_accuracy": 0.75}, nil
		}})
	if err != nil || sum.Evaluations != 1 {
		t.Fatalf("Run: %+v, %v", sum, err)
	}
	mu.Lock() // Run has returned: its last points were sent
	defer mu.Unlock()
	if len(ranks) != 1 || !ranks[2] {
		t.Errorf("points under ranks %v, want 2", ranks)
	}
	for name, v := range map[string]float64{"eval/test_loss": 0.125, "eval/test_accuracy": 0.75} {
		if p := got[name]; p.Step != 40 || p.Value != v || p.Runtime {
			t.Errorf("%s: %+v, want %v at step 40", name, p, v)
		}
	}
	if p := got["eval/seconds"]; p.Step != 40 || p.Value < 0 {
		t.Errorf("eval/seconds: %+v", p)
	}
}
