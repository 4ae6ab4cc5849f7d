package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// Launch runs the job that cfg describes and returns when every rank has
// exited.
//
// It validates cfg, assigns ranks to slots, chooses the rendezvous address
// (below), makes the job secret, starts the rendezvous service, checks
// remote hosts (when their spawner is a HostChecker), and starts one rank
// per slot with its jobenv.Env. Their output is prefixed onto cfg.Stdout
// and cfg.Stderr (and copied to cfg.OutputDir).
//
// The rendezvous address is cfg.BindAddr, else the address of
// cfg.NetworkInterface, else 127.0.0.1 when every host is this machine.
// Otherwise Launch looks up this machine's route to each remote host (to
// the HostName of ssh's configuration, for ssh hosts) and listens on the
// local address of those routes where they agree; where they differ, on
// every interface, each host dialing the address of its own route. The
// preflight of a ReachChecker (ssh) then has every host open a connection
// to its address, and a host that cannot fails Launch before any rank
// starts with a *ConnectBackError that names the host, the address and
// the flags to set instead:
//
//	runner: host node2 cannot connect back to gorun at 10.0.0.1:41234: No route to host; give gorun --bind-addr with an address of this machine that node2 can reach, or --network-interface with the interface that leads to it
//
// A remote host none of whose ranks registers within the start timeout
// while others do (the preflight could not check it, or its ranks are
// slow or cut off after it) gets an *UnregisteredHostError, before the
// failure that stopped the job; it does not wrap ErrConfig.
//
// Launch returns nil when every rank exits with status 0. A rank that
// fails (exits non-zero, dies by a signal, or fails to start) stops the
// job: Launch aborts the rendezvous, sends SIGTERM to every other rank,
// SIGKILL after cfg.GracePeriod, and returns an error that wraps the
// *ExitError of the rank that failed on its own. Ranks often fail because
// another one did (their links to it broke): after the first failure Launch
// waits up to half a second, or until every rank has ended, and names a
// rank killed by a signal first, then a rank that failed otherwise, before
// any rank that reported (through the rendezvous, see jobenv.FailedBecauseKey)
// that a peer caused its failure; the earliest to exit among equals. When
// ranks report that a rank did not answer them in time (jobenv.SilentBecause),
// Launch kills that rank at once and returns an *UnresponsiveError naming
// it, unless a rank died of a signal on its own. A rank that exits with
// status 0 without registering with the rendezvous while another rank has
// registered also stops the job ("rank 1 on a exited with
// status 0 before joining the job"), since the others would wait for it.
// When ctx ends, Launch stops every rank the same way and returns an error
// wrapping ErrInterrupted. Configuration errors come back before anything
// starts (see Config.Validate).
//
// A parameter-server job (Config.PS) starts a chief, NP workers and PS
// servers (AssignPS places them) and, with Config.Evaluator, an evaluator,
// and follows its own rules (see Config.PS): a worker's failure is logged
// and the job goes on; a server that ends before the chief, or a chief
// that fails, stops the job with a *TaskError naming it; after the chief
// exits 0 the others have the grace period to exit on their own (a server
// still running then is a *TaskError), and the evaluator has
// EvaluatorTimeout. Launch returns nil only if the chief, every server
// and the evaluator exited with status 0.
//
// With Config.Dashboard or Config.MetricsDir (and no Config.Metrics of
// the caller's), Launch keeps the job's metrics in a Store of its own: it
// serves the dashboard before the first rank starts and prints its
// address, writes DIR/summary.svg when the job is over, and keeps the
// dashboard up for Config.DashboardLinger before it returns.
func Launch(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Metrics != nil || cfg.Dashboard == "" && cfg.MetricsDir == "" {
		return launchJob(ctx, cfg)
	}
	return launchObserved(ctx, cfg)
}

// launchJob is Launch without the dashboard and the summary, for a cfg
// that Launch has validated.
func launchJob(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.logger()
	hosts, np := cfg.hosts(), cfg.NP
	if cfg.DiscoveryScript != "" {
		if hosts, err = initialHosts(ctx, cfg, log); err != nil {
			return orInterrupted(ctx, err)
		}
		np = min(np, TotalSlots(hosts))
	}
	slots, err := assignSlots(cfg, hosts, np)
	if err != nil {
		return err
	}
	spawnerFor := cfg.spawnerFor()
	if cfg.Verbose {
		logPlan(log, slots)
	}
	plan, err := cfg.netPlan(ctx, slots, spawnerFor)
	if err != nil { // no address found: an unreachable host says more
		if perr := preflight(ctx, cfg, slots, spawnerFor, nil); perr != nil {
			err = perr
		}
		return orInterrupted(ctx, err)
	}
	mstore, endMetrics := openMetrics(cfg)
	defer endMetrics() // after srv.Stop: no more points come
	env, srv, err := startRendezvous(cfg, slots, plan, log, metricsReceiver(mstore))
	if err != nil {
		return err
	}
	defer srv.Stop()
	addrOf := func(host string) string { return plan.addrFor(host, srv.Addr()) }
	if err := preflight(ctx, cfg, slots, spawnerFor, addrOf); err != nil {
		return orInterrupted(ctx, err)
	}
	oopts := outputOptions{ranks: cfg.OutputRanks}
	if cfg.TimestampOutput {
		oopts.now = time.Now
	}
	out, err := newOutput(cfg.Stdout, cfg.Stderr, cfg.OutputDir, len(slots), oopts)
	if err != nil {
		return err
	}
	j := newJob(cfg, log, srv, out, slots)
	j.metrics = mstore
	started := time.Now()
	spawnerAt := withHostAddrs(spawnerFor, plan, srv.Addr())
	spawnErr := j.spawnAll(ctx, env, spawnerAt)
	var ctl controller = newStaticJob(j)
	if cfg.PS > 0 {
		ctl = newPSJob(j)
	}
	if spawnErr == nil && ctx.Err() == nil && cfg.Elastic() {
		ctl, spawnErr = startElastic(ctx, j, hosts, env, spawnerAt)
	}
	err = j.watch(ctx, spawnErr, ctl)
	if cfg.Elastic() { // elastic ranks do not register: they meet in the key-value store
		return err
	}
	return unregisteredHosts(err, srv, slots, addrOf, time.Since(started), cfg.StartTimeout)
}

// assignSlots places the ranks: Assign, or AssignPS in a parameter-server
// job (np workers and cfg.PS servers).
func assignSlots(cfg Config, hosts []Host, np int) ([]Slot, error) {
	if cfg.PS > 0 {
		return AssignPS(hosts, np, cfg.PS)
	}
	return Assign(hosts, np)
}

// orInterrupted returns err, or the interruption when ctx ended.
func orInterrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	return err
}

// initialHosts runs the discovery script until it lists slots for MinNP
// ranks, for at most the elastic timeout; a script that fails, or prints
// garbage, fails the launch at once.
func initialHosts(ctx context.Context, c Config, log *slog.Logger) ([]Host, error) {
	timeout := c.ElasticTimeout
	if timeout <= 0 {
		timeout = DefaultElasticTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		hosts, err := DiscoverHosts(ctx, c.DiscoveryScript, c.SlotsPerHost)
		if err != nil {
			return nil, err
		}
		if TotalSlots(hosts) >= c.MinNP {
			return hosts, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: waited %v for hosts enough for --min-np %d ranks; the discovery script lists %d %s (%s)",
				ErrElasticTimeout, timeout, c.MinNP, TotalSlots(hosts), plural(TotalSlots(hosts), "slot"), hostList(hosts))
		}
		log.Info("gorun: waiting for hosts", "slots", TotalSlots(hosts), "min_np", c.MinNP)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(discoveryInterval):
		}
	}
}

// hostList is "a:2, b:1", or "none".
func hostList(hosts []Host) string {
	if len(hosts) == 0 {
		return "none"
	}
	return strings.ReplaceAll(FormatHosts(hosts), ",", ", ")
}

// logPlan logs where each rank runs.
func logPlan(log *slog.Logger, slots []Slot) {
	for _, s := range slots {
		log.Info("gorun: slot", "rank", s.Rank, "size", s.Size, "host", s.Host,
			"local_rank", s.LocalRank, "local_size", s.LocalSize,
			"cross_rank", s.CrossRank, "cross_size", s.CrossSize)
	}
}

// preflight checks the hosts of the job, within the start timeout, and
// where addrOf is not nil that they connect back to addrOf(host).
func preflight(ctx context.Context, c Config, slots []Slot, spawnerFor func(string) Spawner, addrOf func(string) string) error {
	ctx, cancel := context.WithTimeout(ctx, c.StartTimeout)
	defer cancel()
	hosts := UsedHosts(slots)
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return checkHosts(ctx, names, spawnerFor, addrOf)
}

// startRendezvous makes the job secret and starts the rendezvous service
// where plan says (its ranks' metrics go to onMetrics), and returns the environment that every rank shares
// (knobs, address, secret); the address is that of this machine's ranks
// (see withHostAddrs for the others).
func startRendezvous(c Config, slots []Slot, plan netPlan, log *slog.Logger, onMetrics func(int, []rendezvous.MetricPoint)) (jobenv.Env, *rendezvous.Server, error) {
	secret, err := NewSecret()
	if err != nil {
		return jobenv.Env{}, nil, err
	}
	hosts := make([]string, len(slots))
	for i, s := range slots {
		hosts[i] = s.Host
	}
	srvLog := slog.New(slog.DiscardHandler) // its warnings repeat Launch's errors
	if c.Verbose {
		srvLog = log
	}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		Addr: plan.listen, Secret: secret, Size: len(slots), Hosts: hosts, Logger: srvLog, TLS: c.TLS,
		OnMetrics: onMetrics,
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		return jobenv.Env{}, nil, c.listenError(plan.listen, err)
	}
	plan.log(log, srv.Addr(), remoteHosts(slots))
	env := c.jobEnv()
	env.RendezvousAddr = plan.addrFor("", srv.Addr())
	env.Secret = secret
	return env, srv, nil
}

// forwardedEnv returns the -x variables as "NAME=value" entries: NAME=value
// entries as they are, bare names with gorun's value (skipped when unset).
func forwardedEnv(forward []string) []string {
	var kv []string
	for _, entry := range forward {
		if strings.Contains(entry, "=") {
			kv = append(kv, entry)
		} else if v, ok := os.LookupEnv(entry); ok {
			kv = append(kv, entry+"="+v)
		}
	}
	return kv
}

// forwardNames returns the names of "NAME=value" entries.
func forwardNames(kv []string) []string {
	names := make([]string, len(kv))
	for i, e := range kv {
		names[i], _, _ = strings.Cut(e, "=")
	}
	return names
}
