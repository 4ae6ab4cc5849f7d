package hvd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// elasticJob is an in-process elastic job: a rendezvous server, the
// test as the launcher that publishes generations, and workers that run
// RunElastic in goroutines, each of which the test can kill (cancel).
type elasticJob struct {
	t      *testing.T
	secret []byte
	srv    *rendezvous.Server
	driver *rendezvous.Client
	gen    int

	shard bool // the workers' optimizers shard their state (ShardState)

	mu      sync.Mutex
	workers map[string]*elasticWorker
	hook    func(w *elasticWorker) hvd.GradientHook // the workers' DistributedOptions.Hook (nil: none)
}

type elasticWorker struct {
	id     string
	cancel context.CancelFunc
	done   chan error
	resets int // OnReset calls
	w      []float64
}

func newElasticJob(t *testing.T) *elasticJob {
	t.Helper()
	secret := bytes.Repeat([]byte{9}, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rendezvous.Dial(ctx, srv.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &elasticJob{t: t, secret: secret, srv: srv, driver: c, workers: map[string]*elasticWorker{}}
}

// publish makes ids (in rank order) the next generation.
func (j *elasticJob) publish(ids ...string) {
	j.t.Helper()
	j.gen++
	g := jobenv.Generation{N: j.gen}
	for _, id := range ids {
		g.Members = append(g.Members, jobenv.ElasticMember{ID: id, Host: "localhost"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jobenv.PublishGeneration(ctx, j.driver, g); err != nil {
		j.t.Fatal(err)
	}
}

// sumData is the dataset: sample i is the value i+1. The job's model
// sums the samples it processes (w[0]), their squares (w[1]) and counts
// them (w[2]), with SGD of learning rate 1 on gradients that are minus
// those sums and an all-reduce that sums: every processed sample adds to
// the parameters exactly once per time it is processed, so after E epochs
// w = E × (Σ x, Σ x², N) exactly if and only if no committed sample was
// lost or repeated.
const sumSamples, sumBatch, sumEpochs = 240, 3, 2

// elasticProgress is the caller's field of the job's state.
type elasticProgress struct{ Steps int }

// start runs worker id; onStep is called after each committed step with
// the worker's rank and the job size.
func (j *elasticJob) start(id string, onStep func(ctx context.Context, w *elasticWorker, rank, size, steps int)) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &elasticWorker{id: id, cancel: cancel, done: make(chan error, 1)}
	j.mu.Lock()
	j.workers[id] = w
	j.mu.Unlock()
	go func() { w.done <- j.run(ctx, w, onStep) }()
}

func (j *elasticJob) run(ctx context.Context, w *elasticWorker, onStep func(ctx context.Context, w *elasticWorker, rank, size, steps int)) error {
	p := hvd.NewParam("w", 3)
	sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
	if err != nil {
		return err
	}
	cfg := hvd.DefaultConfig()
	cfg.RendezvousAddr, cfg.Secret = j.srv.Addr(), j.secret
	cfg.StartTimeout = 20 * time.Second
	// The optimizer's runtime is set by RunElastic at each formation; a
	// runtime of one rank stands in until then.
	solo, err := hvd.NewRuntime(ctx, hvd.DefaultConfig())
	if err != nil {
		return err
	}
	defer solo.Shutdown()
	opts := hvd.DistributedOptions{Op: kernels.Sum, ShardState: j.shard}
	if j.hook != nil {
		opts.Hook = j.hook(w)
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, solo, opts)
	if err != nil {
		return err
	}
	sampler, err := hvd.NewElasticSampler(sumSamples, sumBatch, 5, true)
	if err != nil {
		return err
	}
	pro := &elasticProgress{}
	state, err := hvd.NewElasticState(opt, sampler, pro)
	if err != nil {
		return err
	}
	ecfg := hvd.ElasticConfig{Config: cfg, ID: w.id, OnReset: func(context.Context, *hvd.Runtime) error { w.resets++; return nil }}
	err = hvd.RunElastic(ctx, ecfg, state, func(ctx context.Context, rt *hvd.Runtime) error {
		for sampler.Epoch < sumEpochs {
			for sampler.StepsLeft(rt.Size()) > 0 {
				var s, s2, n float64
				for _, i := range sampler.Batch(rt.Rank(), rt.Size()) {
					x := float64(i + 1)
					s, s2, n = s+x, s2+x*x, n+1
				}
				p.Grad[0], p.Grad[1], p.Grad[2] = -s, -s2, -n
				// The position moves before the update, so that a step
				// that fails in the update leaves the state inconsistent
				// until RunElastic rolls it back.
				sampler.Advance(rt.Size())
				pro.Steps++
				if err := opt.Step(ctx); err != nil {
					return err
				}
				if err := state.Commit(); err != nil {
					return err
				}
				if onStep != nil {
					onStep(ctx, w, rt.Rank(), rt.Size(), pro.Steps)
				}
			}
			sampler.NextEpoch()
			if err := state.Commit(); err != nil {
				return err
			}
		}
		return nil
	})
	w.w = append([]float64(nil), p.Value...)
	return err
}

// kill cancels worker id, as a process killed with its sockets closing,
// and fails unless its RunElastic ends for that.
func (j *elasticJob) kill(id string) {
	j.t.Helper()
	j.workers[id].cancel()
	if err := j.wait(id); !errors.Is(err, context.Canceled) {
		j.t.Fatalf("the killed worker %s returned %v", id, err)
	}
}

// wait returns worker id's result.
func (j *elasticJob) wait(id string) error {
	j.mu.Lock()
	w := j.workers[id]
	j.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-time.After(60 * time.Second):
		j.t.Fatalf("worker %s did not return within 60s", id)
		return nil
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestRunElastic: four workers train; one is killed mid-epoch and the
// three others re-form without it and go on from their last commit; then
// a fifth joins at a commit. The job finishes with every sample of every
// epoch processed exactly once (the model's sums say so), the same
// parameters on every worker, the reset callback run on the survivors at
// each re-formation, and nothing left behind (goroutines, descriptors).
func TestRunElastic(t *testing.T) {
	fds := openFDs(t)
	j := newElasticJob(t)
	killed, added, published := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, once2 sync.Once
	onStep := func(ctx context.Context, w *elasticWorker, rank, size, steps int) {
		if size == 4 && steps == 5 && w.id == "w2" {
			once.Do(func() { close(killed) })
			<-ctx.Done() // the worker waits here until it is killed
		}
		if size == 3 && steps == 30 {
			if rank == 0 {
				once2.Do(func() { close(added) })
			}
			<-published // the job goes on only once the worker was added
		}
	}
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		j.start(id, onStep)
	}
	j.publish("w0", "w1", "w2", "w3")
	<-killed
	j.kill("w2")
	j.publish("w0", "w1", "w3")
	select {
	case <-added:
	case err := <-j.workers["w0"].done:
		t.Fatalf("worker w0 returned during generation 2: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("generation 2 made no progress within 60s")
	}
	j.start("w4", nil)
	j.publish("w0", "w1", "w3", "w4")
	close(published)
	j.wantSums("w0", "w1", "w3", "w4")
	for _, id := range []string{"w0", "w1", "w3"} {
		if r := j.workers[id].resets; r != 2 {
			t.Errorf("worker %s: the reset callback ran %d times, want 2", id, r)
		}
	}
	j.driver.Close()
	j.srv.Stop()
	if n := openFDs(t); n > fds {
		t.Errorf("%d descriptors open after the job, %d before", n, fds)
	}
}

// wantSums checks that worker ids ended with the model of every sample
// processed exactly once per epoch.
func (j *elasticJob) wantSums(ids ...string) {
	j.t.Helper()
	var sum, sum2 float64
	for i := range sumSamples {
		x := float64(i + 1)
		sum, sum2 = sum+x, sum2+x*x
	}
	want := fmt.Sprint([]float64{sumEpochs * sum, sumEpochs * sum2, sumEpochs * sumSamples})
	for _, id := range ids {
		if err := j.wait(id); err != nil {
			j.t.Fatalf("worker %s: %v", id, err)
		}
		if got := fmt.Sprint(j.workers[id].w); got != want {
			j.t.Errorf("worker %s ends with %v, want %v (each sample once per epoch)", id, got, want)
		}
	}
}

// TestRunElasticTwoFailures: a worker is lost mid-step, and another one
// right after the next generation is published (while the job forms or
// syncs it): the two survivors re-form twice and finish with every sample
// processed exactly once.
func TestRunElasticTwoFailures(t *testing.T) { loseTwoOfFour(newElasticJob(t)) }

// loseTwoOfFour runs j on four workers, stops w2 mid-epoch and w3 at the
// next formation, and checks that w0 and w1 processed every sample once.
func loseTwoOfFour(j *elasticJob) {
	killed := make(chan struct{})
	var once sync.Once
	onStep := func(ctx context.Context, w *elasticWorker, rank, size, steps int) {
		if size == 4 && steps == 5 && w.id == "w2" {
			once.Do(func() { close(killed) })
			<-ctx.Done()
		}
	}
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		j.start(id, onStep)
	}
	j.publish("w0", "w1", "w2", "w3")
	<-killed
	j.kill("w2")
	j.publish("w0", "w1", "w3")
	j.kill("w3")
	j.publish("w0", "w1")
	j.wantSums("w0", "w1")
}

// TestRunElasticShardState: with sharded optimizers, the job of four
// workers (whose three values leave one worker no piece) loses one
// mid-epoch and another at the next formation; the survivors re-shard at
// each size and finish with every sample processed exactly once.
func TestRunElasticShardState(t *testing.T) {
	j := newElasticJob(t)
	j.shard = true
	loseTwoOfFour(j)
}

// TestRunElasticRemoved: a generation that leaves out a live worker of
// the one before ends its RunElastic with ErrElasticRemoved at its next
// commit, and the job goes on without it, down to a single rank.
func TestRunElasticRemoved(t *testing.T) {
	j := newElasticJob(t)
	reached, published := make(chan struct{}, 2), make(chan struct{})
	onStep := func(ctx context.Context, w *elasticWorker, rank, size, steps int) {
		if size == 2 && steps == 3 {
			reached <- struct{}{}
			<-published
		}
	}
	j.start("w0", onStep)
	j.start("w1", onStep)
	j.publish("w0", "w1")
	<-reached // both train in the first generation before the second leaves w1 out
	<-reached
	j.publish("w0")
	close(published)
	if err := j.wait("w1"); !errors.Is(err, hvd.ErrElasticRemoved) {
		t.Fatalf("the removed worker returned %v, want ErrElasticRemoved", err)
	}
	j.wantSums("w0")
}

// TestRunElasticWaitsToBeNamed: a worker started while the latest
// generation does not name it yet (the launcher starts workers before it
// publishes the generation they join) waits for one that does, and joins.
func TestRunElasticWaitsToBeNamed(t *testing.T) {
	j := newElasticJob(t)
	reached, published := make(chan struct{}, 1), make(chan struct{})
	onStep := func(ctx context.Context, w *elasticWorker, rank, size, steps int) {
		if size == 1 && steps == 3 {
			reached <- struct{}{}
			<-published
		}
	}
	j.start("w0", onStep)
	j.publish("w0")
	<-reached
	j.start("w1", nil) // finds generation 1, which leaves it out
	time.Sleep(50 * time.Millisecond)
	j.publish("w0", "w1")
	close(published)
	j.wantSums("w0", "w1")
	if r := j.workers["w0"].resets; r != 1 {
		t.Errorf("w0 formed anew %d times, want 1", r)
	}
}
