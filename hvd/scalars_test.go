package hvd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// metricsJob joins n runtimes through a rendezvous server whose OnMetrics
// is onMetrics (nil: a server that takes no metrics), and returns them
// with the server; configure, if any, changes the runtimes' Config.
func metricsJob(t testing.TB, n int, onMetrics func(int, []rendezvous.MetricPoint), configure ...func(*hvd.Config)) ([]*hvd.Runtime, *rendezvous.Server) {
	t.Helper()
	secret := make([]byte, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: n,
		Hosts: make([]string, n), OnMetrics: onMetrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rts := hvdtest.Start(t, n, hvdtest.WithConfig(func(cfg *hvd.Config) {
		cfg.Transport, cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = nil, srv.Addr(), secret, 10*time.Second
		for _, f := range configure {
			f(cfg)
		}
	}))
	return rts, srv
}

// TestLogScalarsReachTheLauncher: every rank's scalars of every step, and
// its runtime series, reach the rendezvous server's OnMetrics, the last
// ones at Shutdown.
func TestLogScalarsReachTheLauncher(t *testing.T) {
	const n, steps = 2, 20
	type key struct {
		rank int
		name string
	}
	var mu sync.Mutex
	got := map[key][]rendezvous.MetricPoint{}
	rts, _ := metricsJob(t, n, func(rank int, points []rendezvous.MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range points {
			got[key{rank, p.Name}] = append(got[key{rank, p.Name}], p)
		}
	})
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		for s := range int64(steps) {
			x := hvd.NewTensor("x", make([]float32, 1000))
			if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
				return err
			}
			rt.LogScalars(s, map[string]float64{"loss": 1 / float64(s+1), "accuracy": float64(r)})
			time.Sleep(20 * time.Millisecond) // several sends during the run
		}
		return rt.Shutdown()
	})
	mu.Lock()
	defer mu.Unlock()
	for r, rt := range rts {
		loss := got[key{r, "loss"}]
		if len(loss) != steps {
			t.Fatalf("rank %d: %d loss points, want %d", r, len(loss), steps)
		}
		for s, p := range loss {
			if p.Step != int64(s) || p.Value != 1/float64(s+1) || p.Runtime || p.Time == 0 {
				t.Errorf("rank %d: loss point %d is %+v", r, s, p)
			}
		}
		if acc := got[key{r, "accuracy"}]; len(acc) != steps || acc[0].Value != float64(r) {
			t.Errorf("rank %d: accuracy %+v", r, acc)
		}
		last := func(name string) rendezvous.MetricPoint {
			ps := got[key{r, name}]
			if len(ps) == 0 {
				t.Fatalf("rank %d: no %s", r, name)
			}
			if !ps[len(ps)-1].Runtime {
				t.Errorf("rank %d: %s not marked runtime", r, name)
			}
			return ps[len(ps)-1]
		}
		if p := last("hvd/step"); p.Value != steps-1 || p.Step != steps-1 {
			t.Errorf("rank %d: last hvd/step %+v, want step %d", r, p, steps-1)
		}
		if p := last("hvd/allreduce_bytes"); p.Value != steps*4000 {
			t.Errorf("rank %d: hvd/allreduce_bytes %v, want %d", r, p.Value, steps*4000)
		}
		if p := last("hvd/step_seconds"); p.Value <= 0 || p.Value > 10 {
			t.Errorf("rank %d: hvd/step_seconds %v", r, p.Value)
		}
		if p := last(fmt.Sprintf("hvd/link_sent_bytes/%d", 1-r)); p.Value < steps*2000 {
			t.Errorf("rank %d: sent %v bytes to rank %d, want at least %d", r, p.Value, 1-r, steps*2000)
		}
		if p := last("hvd/dropped_points"); p.Value != 0 || rt.DroppedScalars() != 0 {
			t.Errorf("rank %d: dropped %v (counter %d), want none", r, p.Value, rt.DroppedScalars())
		}
		if len(got[key{r, "hvd/comm_share"}]) == 0 {
			t.Errorf("rank %d: no hvd/comm_share", r)
		}
	}
}

// TestLogScalarsBadNames: a scalar whose name the rendezvous refuses
// (empty, or longer than rendezvous.MaxKeyLen) is dropped and counted
// alone; the other scalars of the same calls arrive.
func TestLogScalarsBadNames(t *testing.T) {
	const steps = 50
	var mu sync.Mutex
	got := map[string]int{}
	rts, _ := metricsJob(t, 2, func(rank int, points []rendezvous.MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range points {
			if rank == 0 {
				got[p.Name]++
			}
		}
	})
	rt := rts[0]
	long := strings.Repeat("x", rendezvous.MaxKeyLen+1)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		for s := range int64(steps) {
			if r == 0 {
				rt.LogScalars(s, map[string]float64{"loss": 1, "": 2, long: 3})
			}
		}
		return rt.Shutdown()
	})
	mu.Lock()
	defer mu.Unlock()
	if got["loss"] != steps || got[""] != 0 || got[long] != 0 {
		t.Errorf("got %d loss points (want %d), %d empty names, %d long ones", got["loss"], steps, got[""], got[long])
	}
	if d := rt.DroppedScalars(); d != 2*steps {
		t.Errorf("DroppedScalars %d, want %d", d, 2*steps)
	}
}

// TestLogScalarsNeverBlocks: with nobody to take the points (a server
// without OnMetrics, or no server at all), 100,000 calls return at once
// and every point is counted as dropped.
func TestLogScalarsNeverBlocks(t *testing.T) {
	for _, c := range []struct {
		name   string
		stop   bool
		listen func(int, []rendezvous.MetricPoint)
	}{{"no-receiver", false, nil}, {"server-gone", true, func(int, []rendezvous.MetricPoint) {}}} {
		t.Run(c.name, func(t *testing.T) {
			rts, srv := metricsJob(t, 2, c.listen) // of 2 ranks: a job of 1 does not join the rendezvous
			rt := rts[0]
			if c.stop {
				srv.Stop()
			}
			m := map[string]float64{"a": 1, "b": 2, "c": 3, "d": 4}
			const calls = 100_000
			start := time.Now()
			for i := range int64(calls) {
				rt.LogScalars(i, m)
			}
			// A blocking call would cost at least one send timeout (1s) per
			// call; 10s for all of them leaves room for a loaded machine.
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%d calls took %s", calls, d)
			}
			rt.Shutdown()
			if d := rt.DroppedScalars(); d < 4*calls {
				t.Errorf("dropped %d points, want at least %d", d, 4*calls)
			}
		})
	}
}

// TestLogScalarsWithoutLauncher: a runtime that gorun did not start
// drops its scalars and counts them; before Init, LogScalars does nothing.
func TestLogScalarsWithoutLauncher(t *testing.T) {
	hvd.LogScalars(1, map[string]float64{"loss": 1})
	rts := hvdtest.Start(t, 2)
	rts[1].LogScalars(1, map[string]float64{"loss": 1, "lr": 0.1})
	if d := rts[1].DroppedScalars(); d != 2 {
		t.Errorf("dropped %d, want 2", d)
	}
}

// TestLogScalarsConcurrent: calls from several goroutines are safe.
func TestLogScalarsConcurrent(t *testing.T) {
	var mu sync.Mutex
	total := 0
	rts, _ := metricsJob(t, 2, func(_ int, points []rendezvous.MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range points {
			if !strings.HasPrefix(p.Name, "hvd/") {
				total++
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range int64(500) {
				rts[0].LogScalars(i, map[string]float64{fmt.Sprint("g", g): float64(i)})
			}
		})
	}
	wg.Wait()
	rts[0].Shutdown()
	mu.Lock()
	defer mu.Unlock()
	if total+int(rts[0].DroppedScalars()) != 2000 || total == 0 {
		t.Errorf("received %d, dropped %d, want 2000 in all", total, rts[0].DroppedScalars())
	}
}

// TestLogScalarsUnderAnotherLauncher: in a job that another launcher
// started (torchrun-style variables here; srun and mpirun take the same
// path: rank 0 serves the rendezvous only until the mesh forms and no
// rank keeps a client), LogScalars drops every point and counts it, and
// neither it nor Shutdown waits for a send.
func TestLogScalarsUnderAnotherLauncher(t *testing.T) {
	const n, calls = 2, 50_000
	port := freePort(t)
	envs := make([]func(string) string, n)
	for r := range n {
		envs[r] = torchrunEnv(r, n, port)
	}
	rts, errs := joinDetected(t, envs, 20*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	m := map[string]float64{"loss": 1, "accuracy": 0.5}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		start := time.Now()
		for i := range int64(calls) {
			rt.LogScalars(i, m)
		}
		if err := rt.Shutdown(); err != nil {
			return err
		}
		// A call or a Shutdown that waited for a send would take a send
		// timeout (1 s) each; 10 s in all leaves room for a loaded machine.
		if d := time.Since(start); d > 10*time.Second {
			return fmt.Errorf("%d calls and Shutdown took %v", calls, d)
		}
		if d := rt.DroppedScalars(); d != calls*int64(len(m)) {
			return fmt.Errorf("dropped %d, want %d", d, calls*len(m))
		}
		return nil
	})
}
