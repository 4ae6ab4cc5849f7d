package hvd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
	"github.com/gorovod/gorovod/settings"
)

// ErrHostsUpdated is what ElasticState.Commit returns, after committing,
// once the launcher has formed a newer generation of the job (workers
// joined, or one was lost where this rank has not noticed yet): the
// training function returns it and RunElastic re-forms the job, losing
// nothing since the state was just committed.
var ErrHostsUpdated = errors.New("hvd: the elastic job is re-forming")

// ErrElasticRemoved is RunElastic's error when the launcher's latest
// generation leaves out this worker, which was in an earlier one. (A
// worker that was in none yet waits for one that names it: the launcher
// starts workers before it publishes the generation they join.)
var ErrElasticRemoved = errors.New("hvd: this worker is not in the elastic job any more")

// ElasticConfig describes one worker of an elastic job: the job's
// settings, which stay the same across formations, and the worker's name
// in the launcher's generations (see jobenv.Generation).
type ElasticConfig struct {
	// Config holds the rendezvous address, secret, bind address, knobs,
	// logger and communicator options. Its rank, size, topology,
	// hostname and transport are ignored: each generation gives them.
	Config
	// ID names this worker in the generations (GOROVOD_ELASTIC_ID).
	ID string
	// metricsRank, when positive, is 1 + the number under which this
	// worker's metrics (LogScalars, the runtime's series) go to gorun
	// (GOROVOD_METRICS_RANK: its launch index, the same in every
	// generation); 0: they are dropped and counted.
	metricsRank int
	// OnReset, if set, runs on a worker after each formation but its
	// first (so not on workers that join there), after the state is synced
	// and before training goes on: the place to rescale a learning rate to
	// the new size.
	OnReset func(ctx context.Context, rt *Runtime) error
}

// ElasticConfigFromEnv reads the ElasticConfig of a worker that gorun
// started in an elastic job (gorun --min-np): the job's settings as
// ConfigFromEnv reads them, and the worker's name (GOROVOD_ELASTIC_ID,
// required).
func ElasticConfigFromEnv(getenv func(string) string) (ElasticConfig, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return ElasticConfig{}, err
	}
	id := getenv(jobenv.EnvElasticID)
	if id == "" {
		return ElasticConfig{}, fmt.Errorf("%w: %s is not set: start the program with gorun --min-np N", ErrElasticState, jobenv.EnvElasticID)
	}
	ec := ElasticConfig{Config: cfg, ID: id}
	if n, err := strconv.Atoi(getenv(jobenv.EnvMetricsRank)); err == nil && n >= 0 {
		ec.metricsRank = n + 1
	}
	return ec, nil
}

// RunElastic runs train on this worker as a member of an elastic job,
// in the manner of Horovod Elastic's run loop: it waits for the
// launcher's first generation, forms that job (a mesh authenticated with
// the job secret, shared memory between ranks on a host), makes every
// rank's state rank 0's (ElasticState.Sync) and calls train with the
// job's Runtime. When the job breaks (a rank is lost: train returns an
// error and the runtime's engine or communicator has failed) or grows (Commit
// returns ErrHostsUpdated), it shuts the runtime down, rolls the state
// back to its last commit, waits for the launcher's next generation,
// forms it, syncs and calls train again, with the new ranks. It returns
// nil once train returns nil; train's own errors (the runtime still
// sound, no newer generation) end it, as does ctx. train must commit the
// state regularly (ElasticState.Commit) and take its position in the data
// from it (an ElasticSampler among its fields); state's optimizer, if it
// is a DistributedOptimizer, averages over each new job. Under gorun
// (--min-np) take cfg from ElasticConfigFromEnv and do not call Init:
// RunElastic forms each job itself.
func RunElastic(ctx context.Context, cfg ElasticConfig, state *ElasticState, train func(ctx context.Context, rt *Runtime) error) error {
	if cfg.ID == "" || state == nil || train == nil {
		return fmt.Errorf("%w: RunElastic needs a worker ID, a state and a training function", ErrElasticState)
	}
	log, err := leveledLogger(cfg.Logger, cfg.workerEnv())
	if err != nil {
		return err
	}
	log = log.With("worker", cfg.ID)
	rdv, err := rendezvous.Dial(ctx, cfg.RendezvousAddr, cfg.Secret, rendezvous.WithLogger(log), rendezvous.WithTLS(cfg.TLS))
	if err != nil {
		return fmt.Errorf("hvd: elastic worker %s: joining the rendezvous at %s: %w", cfg.ID, cfg.RendezvousAddr, err)
	}
	defer rdv.Close()
	beat, stopBeat := context.WithCancel(ctx)
	defer stopBeat()
	go jobenv.Heartbeat(beat, rdv, cfg.ID) // the launcher's sign of life from this worker
	last := 0
	member := false       // this worker was in a generation already
	var resetAt time.Time // when the last reset began; zero before the first formation
	for {
		g, err := jobenv.AwaitGeneration(ctx, rdv, last)
		if err != nil {
			return fmt.Errorf("hvd: elastic worker %s: waiting for generation %d: %w", cfg.ID, last+1, err)
		}
		last = g.N
		rank := g.RankOf(cfg.ID)
		switch {
		case rank < 0 && member:
			return fmt.Errorf("%w: generation %d has %d other workers", ErrElasticRemoved, g.N, len(g.Members))
		case rank < 0: // started for a generation not published yet
			continue
		}
		member = true
		gen := generationRun{cfg: cfg, rdv: rdv, g: g, rank: rank, log: log, resetAt: resetAt}
		err = gen.run(ctx, state, train)
		var reset *resetError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("hvd: elastic worker %s: %w (in generation %d: %w)", cfg.ID, ctx.Err(), g.N, err)
		case !errors.As(err, &reset):
			return err
		}
		resetAt = time.Now()
		log.Info("hvd: elastic job re-forming", "generation", g.N, "rank", rank, "size", len(g.Members), "because", reset.err)
		if err := state.Restore(); err != nil {
			return err
		}
	}
}

// generationRun is one formation of the job on this worker.
type generationRun struct {
	cfg     ElasticConfig
	rdv     *rendezvous.Client
	g       jobenv.Generation
	rank    int
	log     *slog.Logger
	resetAt time.Time // when the reset before it began; zero for the first
}

// resetError marks an error after which the job re-forms.
type resetError struct{ err error }

func (e *resetError) Error() string { return e.err.Error() }
func (e *resetError) Unwrap() error { return e.err }

// run forms the generation as its rank, syncs the state and trains; an
// error after which the job should re-form is a *resetError. A newer
// generation ends the formation; one that leaves out a member of this one
// also aborts the training (that member cannot take part any more: its
// host may be cut off, so that its links neither answer nor break).
func (gr generationRun) run(ctx context.Context, state *ElasticState, train func(ctx context.Context, rt *Runtime) error) error {
	cfg, rdv, g, rank := gr.cfg, gr.rdv, gr.g, gr.rank
	again := !gr.resetAt.IsZero()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	newer := make(chan struct{})
	go func() {
		if _, err := jobenv.NewerGeneration(wctx, rdv, g.N); err == nil {
			close(newer)
		}
	}()
	reformed := func() bool {
		select {
		case <-newer:
			return true
		default:
			return false
		}
	}
	fctx, cancel := context.WithTimeout(ctx, startTimeoutOf(cfg.Config))
	go func() { // a newer generation ends the formation of this one
		select {
		case <-newer:
			cancel()
		case <-fctx.Done():
		}
	}()
	received := time.Now()
	rt, err := formGeneration(fctx, cfg, rdv, g, rank)
	cancel()
	if err != nil {
		if reformed() {
			return &resetError{fmt.Errorf("generation %d did not form: %w", g.N, err)}
		}
		return fmt.Errorf("hvd: elastic worker %s: forming generation %d as rank %d of %d: %w", cfg.ID, g.N, rank, len(g.Members), err)
	}
	defer rt.Shutdown()
	formed := time.Now()
	go func() { // a newer generation without one of this one's members aborts it
		select {
		case <-newer:
		case <-wctx.Done():
			return
		}
		if next, err := jobenv.AwaitGeneration(wctx, rdv, g.N); err == nil {
			for _, m := range g.Members {
				if next.RankOf(m.ID) < 0 {
					rt.comm.Abort(fmt.Errorf("%w: generation %d leaves out %s (rank %d of generation %d)", ErrHostsUpdated, next.N, m.ID, g.RankOf(m.ID), g.N))
					return
				}
			}
		}
	}()
	state.attach(rt, newer)
	defer state.attach(nil, nil)
	err = state.Sync(ctx, rt)
	if again {
		gr.log.Info("hvd: elastic job formed anew", "generation", g.N, "rank", rank, "size", len(g.Members),
			"waited_for_generation", received.Sub(gr.resetAt), "mesh", formed.Sub(received), "sync", time.Since(formed))
	}
	if err == nil && again && cfg.OnReset != nil {
		err = cfg.OnReset(ctx, rt)
	}
	if err == nil {
		err = train(ctx, rt)
	}
	if err != nil && (errors.Is(err, ErrHostsUpdated) || rt.comm.Err() != nil || rt.engine.Err() != nil || reformed()) {
		return &resetError{err}
	}
	return err
}

// formGeneration forms the mesh of generation g as rank and starts its
// runtime.
func formGeneration(ctx context.Context, cfg ElasticConfig, rdv *rendezvous.Client, g jobenv.Generation, rank int) (*Runtime, error) {
	hosts := g.Hosts()
	n := len(hosts)
	c := cfg.Config
	c.Rank, c.Size, c.Hostname, c.Transport = rank, n, hosts[rank], nil
	s := jobenv.SlotsOf(hosts)[rank]
	c.LocalRank, c.LocalSize, c.CrossRank, c.CrossSize = s.LocalRank, s.LocalSize, s.CrossRank, s.CrossSize
	c.Comm.Hosts = hostIndexes(hosts)
	if n > 1 {
		env := c.workerEnv()
		allLocal := hostCount(hosts) == 1
		host, err := jobenv.DataPlaneHost(env.BindAddr, cfg.RendezvousAddr, allLocal, nil)
		if err != nil {
			return nil, err
		}
		ln, err := tcptransport.Listen(net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		addrs, machines, err := jobenv.ExchangeAddrs(ctx, rdv, g.N, rank, n, ln.Addr(), jobenv.MachineID())
		if err != nil {
			ln.Close()
			return nil, err
		}
		tr, err := tcptransport.Connect(ctx, ln, tcptransport.Config{
			Rank: rank, Size: n, Addrs: addrs, Secret: cfg.Secret, Logger: cfg.Logger, NoSharedMemory: env.NoSharedMemory,
			TLS: env.TLS, Congestion: env.TCPCongestion, Eager: collective.SchedulePeers(rank, n, c.Comm.Hosts), Machines: machines,
		})
		if err != nil {
			return nil, err
		}
		c.Transport = tr
	}
	rt, err := NewRuntime(ctx, c)
	if err != nil && c.Transport != nil {
		c.Transport.Close()
	}
	if err == nil && cfg.metricsRank > 0 {
		rt.pub.attach(rdv, cfg.metricsRank-1) // the worker's client, which outlives the generation (scalars.go)
	}
	return rt, err
}

// hostIndexes numbers the hosts of hostOf in order of first appearance.
func hostIndexes(hostOf []string) []int {
	index := map[string]int{}
	out := make([]int, len(hostOf))
	for i, h := range hostOf {
		if _, ok := index[h]; !ok {
			index[h] = len(index)
		}
		out[i] = index[h]
	}
	return out
}

// startTimeoutOf is how long a formation may take: the job's start
// timeout.
func startTimeoutOf(c Config) time.Duration {
	if d := c.workerEnv().StartTimeout; d > 0 {
		return d
	}
	return settings.DefaultStartTimeout
}
