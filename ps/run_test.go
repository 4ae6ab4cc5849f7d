package ps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// TestRunEndsSoonAfterAServerDies: a parameter server stops while a
// worker's step pulls from it again and again (its calls wait in the
// queue for a server that cannot be dialled, each up to the worker's call
// timeout, a minute): the chief fails naming the server within 18 s (its
// ping's timeout and a little; a failed chief shuts no server down, so it
// does not wait on the dead one), and the worker,
// which the chief then stops, returns within seconds rather than waiting
// out its queued call's timeout in Client.Close.
func TestRunEndsSoonAfterAServerDies(t *testing.T) {
	secret := psSecret(t)
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := Job{Workers: 1, Servers: 1, ChiefAddr: ln.Addr().String(), ServerAddrs: []string{srv.Addr()}, Secret: secret}
	chiefJob, workerJob := base, base
	chiefJob.Role, chiefJob.Listener, chiefJob.OpTimeout = jobenv.RoleChief, ln, 10*time.Second
	workerJob.Role, workerJob.Rank, workerJob.OpTimeout = jobenv.RoleWorker, 1, time.Minute
	started, stopped := make(chan struct{}), make(chan struct{})
	p := Program{
		HeartbeatTimeout: 2 * time.Second,
		Steps: map[string]StepFunc{"pull": func(ctx context.Context, w *WorkerContext, _ []byte) ([]byte, error) {
			close(started)
			<-stopped
			// The first Pull may fail at once on the closed connection;
			// the next ones wait in the queue for a server to dial.
			for ctx.Err() == nil {
				w.Client.Pull(ctx, map[string][]float64{})
			}
			return nil, ctx.Err()
		}},
		Chief: func(ctx context.Context, c *Chief) error {
			part, _ := FixedShardsPartitioner(1)
			if err := c.Client.Create(ctx, []Variable{{Name: "v", Shape: []int{1}, Value: []float64{0}}}, part, Optimizer{Kind: "sgd", LR: 0.1}); err != nil {
				return err
			}
			_, err := c.Schedule("pull", nil).Wait(ctx)
			return err
		},
	}
	ctx := context.Background()
	chiefErr, workerErr := make(chan error, 1), make(chan error, 1)
	go func() { chiefErr <- runChief(ctx, &chiefJob, p) }()
	go func() { workerErr <- runWorker(ctx, &workerJob, p) }()
	select {
	case <-started:
	case err := <-chiefErr:
		t.Fatalf("the chief ended before the step started: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the step did not start")
	}
	srv.Stop()
	close(stopped)
	killed := time.Now()
	select {
	case err := <-chiefErr:
		// Found by its ping (each second, with the chief's call timeout
		// of 10 s); the failed chief leaves the servers to the launcher.
		t.Logf("the chief failed %v after the server stopped", time.Since(killed).Round(time.Millisecond))
		if took := time.Since(killed); took > 18*time.Second {
			t.Errorf("the chief failed %v after the server stopped, want within 18s", took)
		}
		if sf := serverFailure(nil); !errors.As(err, &sf) {
			t.Errorf("the chief: %v, want an error naming server 0", err)
		} else if i, _ := sf.PSServer(); i != 0 {
			t.Errorf("the chief: %v, names server %d, want 0", err, i)
		}
	case <-time.After(time.Minute):
		t.Fatal("the chief did not fail")
	}
	chiefEnded := time.Now()
	select {
	case err := <-workerErr:
		t.Logf("the worker returned %v after the chief: %v", time.Since(chiefEnded).Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("the worker: %v, want nil (the chief stopped it)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not return within 20s of the chief's end: it waits for its Pull queued to the stopped server")
	}
}

// TestWatchServersFailsTheCoordinator: the chief's watch of the servers
// fails the coordinator with a ServerError naming a server that stopped,
// so that a Join waiting on steps no worker runs ends within about a
// watch period and a call timeout, and says which server it was.
func TestWatchServersFailsTheCoordinator(t *testing.T) {
	secret := psSecret(t)
	servers, addrs := startPS(t, 2, secret, 0, nil)
	client := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1, CallTimeout: time.Second})
	coord, err := NewCoordinator(CoordinatorConfig{Addr: "127.0.0.1:0", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	defer coord.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan *ServerError, 1)
	go func() { watched <- watchServers(ctx, client, coord) }()
	defer cancel()
	rv := coord.Schedule("train", nil) // no worker: it waits until the coordinator fails
	servers[1].Stop()
	start := time.Now()
	jctx, jcancel := context.WithTimeout(context.Background(), time.Minute)
	defer jcancel()
	err = coord.Join(jctx)
	took := time.Since(start)
	var se interface{ PSServer() (int, string) }
	if !errors.As(err, &se) {
		t.Fatalf("Join after server 1 stopped: %v, want an error naming the server", err)
	}
	if i, addr := se.PSServer(); i != 1 || addr != addrs[1] {
		t.Errorf("the error names server %d (%s), want 1 (%s)", i, addr, addrs[1])
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("parameter server 1 (%s)", addrs[1])) {
		t.Errorf("%q does not name server 1 and its address", err)
	}
	if _, err := rv.Wait(jctx); err == nil {
		t.Error("the pending step did not fail")
	}
	if took > serverWatch+time.Second+20*time.Second {
		t.Errorf("Join ended %v after the server stopped, want about a watch period and a call timeout", took)
	}
	if se := <-watched; se == nil || se.Index != 1 {
		t.Errorf("watchServers returned %v, want server 1's ServerError", se)
	}
	t.Logf("the coordinator failed %v after the server stopped", took)
}

// TestStalenessIdleWorkerHoldsNobodyBack: with a staleness bound of 1 and
// 3 workers, the chief runs one step at a time (each waited for before the
// next is scheduled), so the steps fall to the workers by chance and one
// soon runs 2 ahead of another that has no step to run. That idle worker
// must not hold the busy one back: the job finishes, every step once,
// where it used to wait for the idle worker until the servers' op timeout
// (10 minutes). Then chunks of 4 steps, as examples/mnist schedules them.
func TestStalenessIdleWorkerHoldsNobodyBack(t *testing.T) {
	secret := psSecret(t)
	var waits atomic.Int64
	_, addrs := startPS(t, 2, secret, 1, func() { waits.Add(1) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const workers, single, chunks = 3, 300, 30
	base := Job{Workers: workers, Servers: len(addrs), ChiefAddr: ln.Addr().String(), ServerAddrs: addrs, Secret: secret, OpTimeout: time.Hour}
	var ran [workers]atomic.Int64
	p := Program{
		Staleness: 1,
		Steps: map[string]StepFunc{"step": func(ctx context.Context, w *WorkerContext, _ []byte) ([]byte, error) {
			vals := map[string][]float64{"v": make([]float64, 4)}
			if _, err := w.Client.Pull(ctx, vals); err != nil {
				return nil, err
			}
			ran[w.Index].Add(1)
			return nil, w.Client.Push(ctx, map[string][]float64{"v": {1, 1, 1, 1}})
		}},
		Chief: func(ctx context.Context, c *Chief) error {
			part, _ := FixedShardsPartitioner(2)
			if err := c.Client.Create(ctx, []Variable{{Name: "v", Shape: []int{4}, Value: make([]float64, 4)}}, part, Optimizer{Kind: "sgd", LR: 1}); err != nil {
				return err
			}
			for i := range single {
				if _, err := c.Schedule("step", nil).Wait(ctx); err != nil {
					return fmt.Errorf("step %d alone: %w", i, err)
				}
			}
			for i := range chunks {
				rvs := make([]*RemoteValue, 4)
				for k := range rvs {
					rvs[k] = c.Schedule("step", nil)
				}
				for _, rv := range rvs {
					if _, err := rv.Wait(ctx); err != nil {
						return fmt.Errorf("chunk %d: %w", i, err)
					}
				}
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chiefJob := base
	chiefJob.Role, chiefJob.Listener = jobenv.RoleChief, ln
	errs := make(chan error, workers+1)
	go func() { errs <- runChief(ctx, &chiefJob, p) }()
	for i := range workers {
		wj := base
		wj.Role, wj.Rank, wj.Index = jobenv.RoleWorker, 1+i, i
		go func() { errs <- runWorker(ctx, &wj, p) }()
	}
	for range workers + 1 {
		if err := <-errs; err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the job stalled for 30 s (a busy worker waits at the staleness bound for an idle one): %v", err)
			}
			t.Fatal(err)
		}
	}
	total := int64(0)
	for i := range ran {
		total += ran[i].Load()
	}
	if total != single+4*chunks {
		t.Errorf("%d steps ran, want %d", total, single+4*chunks)
	}
	if waits.Load() == 0 {
		t.Error("no Pull was held at the staleness bound: the test did not exercise it")
	}
	t.Logf("steps per worker: %d %d %d; pulls held at the bound: %d", ran[0].Load(), ran[1].Load(), ran[2].Load(), waits.Load())
}
