package hvd_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// TestElasticMetrics: the workers of an elastic job, given the numbers
// their metrics take (their launch indexes, 5 and 9 here, as gorun gives
// them in GOROVOD_METRICS_RANK), publish LogScalars and the runtime's
// series through their own rendezvous clients under those numbers, not
// under their ranks in the generation; ElasticConfigFromEnv reads the
// number.
func TestElasticMetrics(t *testing.T) {
	secret := bytes.Repeat([]byte{5}, 32)
	type key struct {
		rank int
		name string
	}
	var mu sync.Mutex
	got := map[key]rendezvous.MetricPoint{}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1,
		OnMetrics: func(rank int, pts []rendezvous.MetricPoint) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range pts {
				got[key{rank, p.Name}] = p
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	driver, err := rendezvous.Dial(ctx, srv.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	defer driver.Close()
	if err := jobenv.PublishGeneration(ctx, driver, jobenv.Generation{N: 1, Members: []jobenv.ElasticMember{
		{ID: "w0", Host: "localhost"}, {ID: "w1", Host: "localhost"}}}); err != nil {
		t.Fatal(err)
	}
	numbers := map[string]int{"w0": 5, "w1": 9}
	errs := make(chan error, 2)
	for id, number := range numbers {
		go func() {
			errs <- func() error {
				p := hvd.NewParam("w", 1)
				sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 0.1})
				if err != nil {
					return err
				}
				solo, err := hvd.NewRuntime(ctx, hvd.DefaultConfig())
				if err != nil {
					return err
				}
				defer solo.Shutdown()
				opt, err := hvd.NewDistributedOptimizer(sgd, solo, hvd.DistributedOptions{Op: kernels.Average})
				if err != nil {
					return err
				}
				state, err := hvd.NewElasticState(opt)
				if err != nil {
					return err
				}
				cfg := hvd.DefaultConfig()
				cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = srv.Addr(), secret, 20*time.Second
				ecfg := hvd.ElasticConfig{Config: cfg, ID: id}
				hvd.SetMetricsRank(&ecfg, number)
				return hvd.RunElastic(ctx, ecfg, state, func(ctx context.Context, rt *hvd.Runtime) error {
					for step := range int64(3) {
						p.Grad[0] = 1
						if err := opt.Step(ctx); err != nil {
							return err
						}
						rt.LogScalars(step, map[string]float64{"loss": float64(rt.Rank())})
					}
					return nil
				})
			}()
		}()
	}
	for range numbers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, number := range numbers {
		if p, ok := got[key{number, "loss"}]; !ok || p.Step != 2 {
			t.Errorf("worker %s: loss under %d: %+v (seen %v), want step 2", id, number, p, ok)
		}
		if p, ok := got[key{number, "hvd/allreduce_tensors"}]; !ok || p.Value != 3 {
			t.Errorf("worker %s: hvd/allreduce_tensors under %d: %+v (seen %v), want 3", id, number, p, ok)
		}
	}
	for _, r := range []int{0, 1} {
		if p, ok := got[key{r, "loss"}]; ok {
			t.Errorf("points under the generation's rank %d: %+v", r, p)
		}
	}
	for v, want := range map[string]int{"4": 4, "": -1, "x": -1} {
		ec, err := hvd.ElasticConfigFromEnv(func(k string) string {
			return map[string]string{jobenv.EnvElasticID: "h/4", jobenv.EnvMetricsRank: v}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := hvd.MetricsRankOf(ec); got != want {
			t.Errorf("ElasticConfigFromEnv with %s=%q: metrics number %d, want %d", jobenv.EnvMetricsRank, v, got, want)
		}
	}
}
