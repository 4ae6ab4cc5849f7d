package ps

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/metricpush"
	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// TestTaskMetrics: under a rendezvous that takes metrics (gorun's), the
// chief's LogScalars, each worker's own series (steps, pushes, pulls,
// global step, staleness) and the server's (step, pushes and pulls
// served, bytes in and out, each worker's push staleness) arrive under
// their ranks.
func TestTaskMetrics(t *testing.T) {
	secret := psSecret(t)
	type key struct {
		rank int
		name string
	}
	var mu sync.Mutex
	got := map[key]rendezvous.MetricPoint{}
	rsrv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 3, Hosts: make([]string, 3),
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
	if err := rsrv.Start(); err != nil {
		t.Fatal(err)
	}
	defer rsrv.Stop()
	pusher := func(rank int) *metricpush.Pusher {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := rendezvous.Dial(ctx, rsrv.Addr(), secret)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return metricpush.New(c, rank, nil)
	}

	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := Job{Workers: 1, Servers: 1, ChiefAddr: ln.Addr().String(), ServerAddrs: []string{sln.Addr().String()}, Secret: secret, OpTimeout: time.Minute}
	chiefJob, workerJob, serverJob := base, base, base
	chiefJob.Role, chiefJob.Listener, chiefJob.pub = jobenv.RoleChief, ln, pusher(0)
	workerJob.Role, workerJob.Rank, workerJob.pub = jobenv.RoleWorker, 1, pusher(1)
	serverJob.Role, serverJob.Rank, serverJob.pub = jobenv.RolePS, 2, pusher(2)
	const steps = 3
	p := Program{
		Steps: map[string]StepFunc{"train": func(ctx context.Context, w *WorkerContext, _ []byte) ([]byte, error) {
			vals := map[string][]float64{}
			if _, err := w.Client.Pull(ctx, vals); err != nil {
				return nil, err
			}
			return nil, w.Client.Push(ctx, map[string][]float64{"v": {1}})
		}},
		Chief: func(ctx context.Context, c *Chief) error {
			part, _ := FixedShardsPartitioner(1)
			if err := c.Client.Create(ctx, []Variable{{Name: "v", Shape: []int{1}, Value: []float64{0}}}, part, Optimizer{Kind: "sgd", LR: 0.1}); err != nil {
				return err
			}
			for range steps {
				if _, err := c.Schedule("train", nil).Wait(ctx); err != nil {
					return err
				}
			}
			c.LogScalars(steps, map[string]float64{"loss": 0.5})
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	workerErr, serverErr := make(chan error, 1), make(chan error, 1)
	go func() {
		serverErr <- serve(ctx, ServerConfig{Listener: sln, Secret: secret, OpTimeout: time.Minute}, serverJob.serverSeries)
	}()
	go func() { workerErr <- runWorker(ctx, &workerJob, p) }()
	if err := runChief(ctx, &chiefJob, p); err != nil {
		t.Fatal(err)
	}
	if err := <-workerErr; err != nil {
		t.Fatal(err)
	}
	if err := <-serverErr; err != nil { // the chief shut it down
		t.Fatal(err)
	}
	chiefJob.pub.Close()
	workerJob.pub.Close()
	serverJob.pub.Close()
	mu.Lock()
	defer mu.Unlock()
	if l := got[key{0, "loss"}]; l.Step != steps || l.Value != 0.5 || l.Runtime {
		t.Errorf("the chief's loss: %+v", l)
	}
	want := map[string]float64{"ps/steps": steps, "ps/pushes": steps, "ps/pulls": steps, "ps/global_step": steps - 1, "ps/staleness": 0}
	for name, v := range want {
		if p, ok := got[key{1, name}]; !ok || p.Value != v || !p.Runtime || p.Step != steps-1 {
			t.Errorf("the worker's %s: %+v (seen %v), want %v at step %d", name, p, ok, v, steps-1)
		}
	}
	if p := got[key{1, "ps/step_seconds"}]; p.Value <= 0 {
		t.Errorf("the worker's ps/step_seconds: %+v", p)
	}
	// The server's own series, at its step: the worker's 3 pushes and
	// pulls of one float64 each (the chief's Create is neither), and the
	// worker's staleness, 0 as it was alone.
	for name, v := range map[string]float64{"ps/server_step": steps, "ps/server_pushes": steps, "ps/server_pulls": steps,
		"ps/server_bytes_in": 8 * steps, "ps/server_bytes_out": 8 * steps, metrics.PSPushStalenessPrefix + "1": 0} {
		if p, ok := got[key{2, name}]; !ok || p.Value != v || !p.Runtime || p.Step != steps {
			t.Errorf("the server's %s: %+v (seen %v), want %v at step %d", name, p, ok, v, steps)
		}
	}
	if chiefJob.DroppedScalars() != 0 || workerJob.DroppedScalars() != 0 || serverJob.DroppedScalars() != 0 {
		t.Errorf("dropped %d, %d, %d", chiefJob.DroppedScalars(), workerJob.DroppedScalars(), serverJob.DroppedScalars())
	}
}

// TestStaleness: the pushes the servers applied between a client's two
// Pulls, less its own, are its staleness.
func TestStaleness(t *testing.T) {
	var k clientCounts
	k.pulled(10) // the first Pull: nothing to compare with
	k.pushes.Add(1)
	k.pulled(14) // 4 applied, 1 of them its own
	if pushes, pulls, global, st := k.snapshot(); pushes != 1 || pulls != 2 || global != 14 || st != 3 {
		t.Errorf("pushes %d, pulls %d, global %d, staleness %d; want 1, 2, 14, 3", pushes, pulls, global, st)
	}
	k.pushes.Add(1)
	k.pulled(15)
	if _, _, _, st := k.snapshot(); st != 0 {
		t.Errorf("staleness %d after only its own push, want 0", st)
	}
}

// TestServedStaleness: a server counts, for each worker, the pushes of
// others it applied between the worker's last Pull and its push, less the
// worker's own pushes since that Pull; a push before any Pull, and the
// chief's calls (worker -1), set none.
func TestServedStaleness(t *testing.T) {
	var c srvServed
	c.pushed(0, 8, 0) // before any Pull of worker 0: unknown
	c.pulled(0, 16, 1)
	c.pulled(1, 16, 1)
	c.pushed(1, 8, 1) // nothing since its Pull at 1
	c.pushed(0, 8, 2) // worker 1's push since its Pull at 1
	c.pushed(0, 8, 3) // and its own, which does not count
	c.pulled(-1, 16, 4)
	c.pushed(-1, 8, 4)
	var st ServerStats
	c.read(&st)
	if st.Pushes != 5 || st.Pulls != 3 || st.BytesIn != 40 || st.BytesOut != 48 {
		t.Errorf("counts %+v", st)
	}
	if len(st.Staleness) != 2 || st.Staleness[0] != 1 || st.Staleness[1] != 0 {
		t.Errorf("staleness %v, want map[0:1 1:0]", st.Staleness)
	}
}
