package hvd

import (
	"fmt"
	"log/slog"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// Config builds a Runtime: this rank's place in the job, how it reaches the
// others, the job's tuning knobs, and what the runtime logs through. Start
// from DefaultConfig (one rank of size 1) or ConfigFromEnv (what a
// launcher's environment says, as Init reads it). A Config whose Size is 0,
// the zero value among them, is the job of DefaultConfig: one rank of size
// 1 with every knob at its default. Printing a Config (fmt, log/slog)
// redacts its Secret.
type Config struct {
	Rank, Size           int // global rank and number of ranks
	LocalRank, LocalSize int // rank and number of ranks on this host
	CrossRank, CrossSize int // position among, and number of, hosts with this LocalRank

	// Hostname is this rank's host as the launcher's host list names it ("" if unknown).
	Hostname string
	// RendezvousAddr is the host:port of the job's rendezvous service; ""
	// for a single rank or with Transport.
	RendezvousAddr string
	// BindAddr is the address or interface of the data plane; "" chooses one.
	BindAddr string
	// Secret is the job secret (auth.SecretSize bytes) that every
	// connection proves; never logged.
	Secret []byte

	// Knobs are the job's tuning knobs (GOROVOD_LOG_LEVEL and the others;
	// see settings.Knobs), the same on every rank.
	settings.Knobs

	// Transport, when set, is used instead of the rendezvous and TCP mesh
	// (tests run N runtimes in one process this way; see package hvdtest);
	// Rank and Size must match it.
	Transport collective.Transport
	// Logger receives the runtime's logs; nil means slog.Default(). The
	// runtime logs the records at or above LogLevel through it
	// (GOROVOD_LOG_LEVEL, gorun's --log-level), whatever level its handler
	// is set to; an empty LogLevel keeps the handler's own.
	Logger *slog.Logger
	// Comm tunes the collective communicator.
	Comm collective.Options
	// Plan says how to join a job that gorun did not start (ConfigFromEnv
	// makes it with jobenv.Detect): which launcher, whether this rank
	// serves the rendezvous, and what to work out from the peer table. The
	// zero value joins gorun's rendezvous as the Config says.
	Plan jobenv.JoinPlan
}

// DefaultConfig returns the Config of a job of one rank (rank 0 of 1, on
// one host) with every knob at its default (settings.Defaults).
func DefaultConfig() Config { return configOf(jobenv.DefaultEnv(), jobenv.JoinPlan{}) }

// ConfigFromEnv reads, through getenv (os.Getenv in a rank), the Config
// that the launcher which started this process describes: gorun's GOROVOD_*
// variables or, without them, those of Slurm, Open MPI, MPICH, torchrun or
// a GOROVOD_CLUSTER spec (see jobenv.Detect), with the knobs of the
// GOROVOD_* variables that are set. With none of them it is DefaultConfig.
// Unlike Init it leaves GOROVOD_SECRET in the environment.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env, plan, err := jobenv.Detect(getenv)
	if err != nil {
		return Config{}, fmt.Errorf("hvd: reading the launcher's environment: %w", err)
	}
	return configOf(env, plan), nil
}

// configOf returns the Config of the worker environment env joined by plan.
func configOf(env jobenv.Env, plan jobenv.JoinPlan) Config {
	return Config{
		Rank: env.Rank, Size: env.Size,
		LocalRank: env.LocalRank, LocalSize: env.LocalSize,
		CrossRank: env.CrossRank, CrossSize: env.CrossSize,
		Hostname: env.Hostname, RendezvousAddr: env.RendezvousAddr, BindAddr: env.BindAddr, Secret: env.Secret,
		Knobs: env.Knobs, Plan: plan,
	}
}

// workerEnv returns c's place in the job and knobs as the launcher–worker
// contract holds them; DefaultWorkerEnv when Size is 0.
func (c Config) workerEnv() jobenv.Env {
	if c.Size == 0 {
		return jobenv.DefaultEnv()
	}
	return c.env()
}

// env is workerEnv without the default for Size 0.
func (c Config) env() jobenv.Env {
	return jobenv.Env{
		Rank: c.Rank, Size: c.Size,
		LocalRank: c.LocalRank, LocalSize: c.LocalSize,
		CrossRank: c.CrossRank, CrossSize: c.CrossSize,
		Hostname: c.Hostname, RendezvousAddr: c.RendezvousAddr, BindAddr: c.BindAddr, Secret: c.Secret,
		Knobs: c.Knobs,
	}
}

// String formats c's place in the job and knobs as the launcher's
// variables, with the secret redacted, and the launcher of its Plan.
func (c Config) String() string {
	return fmt.Sprintf("hvd.Config{%s launcher=%q}", c.env(), c.Plan.Launcher)
}

// Format makes every fmt verb print String, so that no formatting of a
// Config can reveal the secret.
func (c Config) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue makes log/slog record c as the group jobenv.Env records,
// with the secret redacted.
func (c Config) LogValue() slog.Value { return c.env().LogValue() }
