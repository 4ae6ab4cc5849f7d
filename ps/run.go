package ps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// Program is a parameter-server training program: the step functions
// every worker offers and the chief's loop. Run gives each process of the
// job its part.
type Program struct {
	// Steps are the step functions the chief may schedule, by name; at
	// least one. They run on the workers, each with a Client attached to
	// the servers (WorkerContext.Client).
	Steps map[string]StepFunc
	// Chief is the chief's loop: create the variables on the servers
	// (Chief.Client.Create), schedule steps, join them, checkpoint. Its
	// error is the job's.
	Chief func(ctx context.Context, c *Chief) error
	// Staleness is the servers' stale-synchronous bound
	// (ServerConfig.Staleness); 0 trains asynchronously.
	Staleness int
	// Wire is how the workers' Pulls and Pushes carry values
	// (ClientConfig.Wire); the chief's Create, Load and Pulls are always
	// float64.
	Wire Wire
	// HeartbeatTimeout is how long a silent worker keeps its steps before
	// the chief hands them to another (CoordinatorConfig.HeartbeatTimeout);
	// 0 means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
}

// Chief is what the chief's loop drives: the coordinator, whose Schedule
// and Join it calls, and a client of the servers.
type Chief struct {
	*Coordinator
	// Client is connected to every server (WorkerID -1: it never waits
	// for a staleness bound).
	Client *Client
	job    *Job
}

// Servers is the number of parameter servers in the job.
func (c *Chief) Servers() int { return c.job.Servers }

// JobWorkers is the number of workers the job was started with
// (Coordinator.Workers counts those connected now).
func (c *Chief) JobWorkers() int { return c.job.Workers }

// serverWatch is how often the chief pings the servers while its loop
// runs; a server that does not answer within the call timeout fails the
// coordinator, so the job ends naming it within about
// serverWatch + the call timeout even while no step runs.
const serverWatch = time.Second

// Run runs this process's part of a parameter-server job, as the
// environment says (see Join): a server serves until the chief shuts the
// servers down; a worker runs the steps the chief schedules until the
// chief stops it; the chief runs p.Chief, stops the workers, shuts the
// servers down when p.Chief succeeded (when it failed, the launcher stops
// them: gorun, or Kubernetes for a TFJob whose chief failed) and returns
// p.Chief's error. The evaluator is an error: it runs evaluator.Run instead. ctx
// bounds everything; the start is bounded as Join says.
func Run(ctx context.Context, p Program) error {
	if len(p.Steps) == 0 || p.Chief == nil {
		return errors.New("ps: Run: the Program needs Steps and a Chief")
	}
	job, err := Join(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer job.Close()
	switch job.Role {
	case jobenv.RolePS:
		return serve(ctx, ServerConfig{Listener: job.Listener, Secret: job.Secret, TLS: job.TLS, Index: job.Index,
			Logger: job.Logger, Staleness: p.Staleness, OpTimeout: job.OpTimeout}, job.serverSeries) // metrics.go
	case jobenv.RoleWorker:
		return runWorker(ctx, job, p)
	case jobenv.RoleChief:
		return runChief(ctx, job, p)
	}
	return fmt.Errorf("ps: Run: unexpected role %q", job.Role)
}

// runWorker attaches to the servers before its first step (the chief
// creates the variables before it schedules any) and runs steps.
func runWorker(ctx context.Context, job *Job, p Program) error {
	client, err := DialServers(ctx, job.ServerAddrs, ClientConfig{Secret: job.Secret, TLS: job.TLS, Logger: job.Logger,
		CallTimeout: callTimeout(job), WorkerID: job.Index, Wire: p.Wire})
	if err != nil {
		return err
	}
	defer closeClient(client, job)
	var attach sync.Once
	var attachErr error
	var ran atomic.Int64
	steps := make(map[string]StepFunc, len(p.Steps))
	for name, f := range p.Steps {
		steps[name] = func(ctx context.Context, w *WorkerContext, args []byte) ([]byte, error) {
			attach.Do(func() { attachErr = client.Attach(ctx) })
			if attachErr != nil {
				return nil, attachErr
			}
			start := time.Now()
			res, err := f(ctx, w, args)
			if err == nil {
				job.workerSeries(client, ran.Add(1), time.Since(start)) // to gorun's metrics (metrics.go)
			}
			return res, err
		}
	}
	err = RunWorker(ctx, WorkerConfig{ChiefAddr: job.ChiefAddr, Secret: job.Secret, TLS: job.TLS, Logger: job.Logger,
		Index: job.Index, Workers: job.Workers, Steps: steps, Client: client, HeartbeatTimeout: p.HeartbeatTimeout})
	if errors.Is(err, ErrChiefUnreachable) {
		hb := p.HeartbeatTimeout
		if hb == 0 {
			hb = DefaultHeartbeatTimeout
		}
		job.reportSilent(0, hb) // the chief's rank
	}
	return err
}

// callTimeout bounds each call to a server: the op timeout, as every
// wait for another process of a job is bounded.
func callTimeout(job *Job) time.Duration {
	if job.OpTimeout > 0 {
		return job.OpTimeout
	}
	return DefaultCallTimeout
}

// runChief runs the coordinator and the chief's loop, watching the
// servers, then ends the job.
func runChief(ctx context.Context, job *Job, p Program) error {
	client, err := DialServers(ctx, job.ServerAddrs, ClientConfig{Secret: job.Secret, TLS: job.TLS, Logger: job.Logger,
		CallTimeout: min(callTimeout(job), 10*time.Second), WorkerID: -1})
	if err != nil {
		return err
	}
	defer closeClient(client, job)
	// A lost worker, and one with no step to run, no longer holds the
	// others back at the staleness bound: the servers would wait for it
	// until their op timeout. An idle worker counts again from its next
	// Pull, at the slowest active worker's clock.
	drop := func(index int, why string) {
		if p.Staleness > 0 {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := client.Drop(dctx, index); err != nil {
				job.Logger.Warn("ps: could not drop a worker from the staleness bound", "worker", index, "why", why, "err", err)
			}
		}
	}
	coord, err := NewCoordinator(CoordinatorConfig{Listener: job.Listener, Secret: job.Secret, TLS: job.TLS, Logger: job.Logger,
		HeartbeatTimeout: p.HeartbeatTimeout,
		OnWorkerLost:     func(index int) { drop(index, "lost") },
		OnWorkerIdle:     func(index int) { drop(index, "idle") }})
	if err != nil {
		return err
	}
	if err := coord.Start(); err != nil {
		return err
	}
	defer coord.Stop()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan *ServerError, 1)
	go func() { watched <- watchServers(wctx, client, coord) }()
	loopErr := p.Chief(ctx, &Chief{Coordinator: coord, Client: client, job: job})
	stopWatch()
	if silent := <-watched; silent != nil {
		job.reportSilent(1+job.Workers+silent.Index, client.cfg.CallTimeout) // the server's rank
	}
	if loopErr != nil {
		// The servers are left to the launcher, which stops the job on
		// the chief's failure (gorun; Kubernetes ends a TFJob whose chief
		// failed): shutting them down here would make them exit 0 first
		// and look like the culprit, and a server that stopped answering
		// would hold the chief for the shutdown's bound.
		return loopErr
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	if err := client.Shutdown(sctx); err != nil {
		return fmt.Errorf("ps: shutting the servers down: %w", err)
	}
	return nil
}

// reportSilent tells the launcher, under gorun, that the task of rank
// did not answer this one within limit (jobenv.SilentBecause, under this
// task's FailedBecauseKey): a server that stopped answering the chief, or
// a chief that stopped answering a worker. gorun then names that task
// rather than this one and stops it at once. Best effort, bounded.
func (j *Job) reportSilent(rank int, limit time.Duration) {
	if j.rdv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := j.rdv.Set(ctx, jobenv.FailedBecauseKey(j.Rank), []byte(jobenv.SilentBecause([]int{rank}, limit))); err != nil {
		j.Logger.Debug("ps: could not report the silent server to the launcher", "err", err)
	}
}

// shutdownBound bounds the chief's Shutdown of the servers at the end.
const shutdownBound = 10 * time.Second

// closeBound is how long Run waits for its client of the servers to
// close. Close waits for calls queued to a server that cannot be reached
// until their call timeout (a worker's is the op timeout, 10 minutes by
// default); once this task's part is over nothing needs them, so Run
// returns after closeBound and leaves them to end in the background,
// rather than hold a stopped worker's or a failed chief's process that
// long.
const closeBound = 2 * time.Second

// closeClient closes client, waiting at most closeBound.
func closeClient(client *Client, job *Job) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		client.Close()
	}()
	t := time.NewTimer(closeBound)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		if job.Logger != nil {
			job.Logger.Info("ps: calls to an unreachable parameter server are still queued; not waiting for them", "waited", closeBound)
		}
	}
}

// watchServers pings every server each serverWatch until ctx ends; the
// first that does not answer fails the coordinator with its ServerError,
// so the chief's waits end naming it, and is returned (nil if none).
func watchServers(ctx context.Context, client *Client, coord *Coordinator) *ServerError {
	t := time.NewTicker(serverWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := client.Ping(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if se := (*ServerError)(nil); errors.As(err, &se) {
				coord.Fail(err)
				return se
			}
		}
	}
}
