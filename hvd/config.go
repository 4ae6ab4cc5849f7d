package hvd

import (
	"fmt"
	"log/slog"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/jobenv"
)

// Config builds a Runtime: this rank's place in the job, how it reaches the
// others, the job's tuning knobs, and what the runtime logs through. Start
// from DefaultConfig (one rank of size 1) or ConfigFromEnv (what a
// launcher's environment says, as Init reads it). A Config whose Size is 0,
// the zero value among them, is the job of DefaultConfig: one rank of size
// 1 with every knob at its default. Printing a Config (fmt, log/slog)
// redacts its Secret.
type Config struct {
	// Env is this rank's place in the job (Rank, Size, LocalRank, LocalSize,
	// CrossRank, CrossSize, Hostname), how it reaches the others
	// (RendezvousAddr, "" for a single rank or with Transport; BindAddr;
	// Secret, never logged) and the job's tuning knobs (Knobs: LogLevel and
	// the others, the same on every rank), as the launcher's GOROVOD_*
	// variables carry them. Its fields are promoted: cfg.Rank, cfg.LogLevel.
	jobenv.Env

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
	// ProcessSets lists process sets that NewRuntime adds, in this order,
	// once the job is formed (see Runtime.AddProcessSet; Horovod's
	// init(process_sets=...)): every rank must give the same lists. They
	// have IDs 1, 2, ... and Runtime.ProcessSets returns them. A set that
	// cannot be added fails NewRuntime. When ProcessSets is nil, the sets
	// of Knobs.ProcessSets are added instead (GOROVOD_PROCESS_SETS, gorun's
	// --process-sets; read by Init and ConfigFromEnv). An elastic job's sizes change
	// between generations: add its sets in the training function instead.
	ProcessSets [][]int
}

// DefaultConfig returns the Config of a job of one rank (rank 0 of 1, on
// one host) with every knob at its default (settings.Defaults).
func DefaultConfig() Config { return Config{Env: jobenv.DefaultEnv()} }

// ConfigFromEnv reads, through getenv (os.Getenv in a rank), the Config
// that the launcher which started this process describes: gorun's GOROVOD_*
// variables or, without them, those of Slurm, Open MPI, MPICH, torchrun,
// a GOROVOD_CLUSTER spec or TF_CONFIG (see jobenv.Detect), with the knobs of the
// GOROVOD_* variables that are set. With none of them it is DefaultConfig.
// Unlike Init it leaves GOROVOD_SECRET in the environment.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env, plan, err := jobenv.Detect(getenv)
	if err != nil {
		return Config{}, fmt.Errorf("hvd: reading the launcher's environment: %w", err)
	}
	return Config{Env: env, Plan: plan}, nil
}

// workerEnv returns c's Env, or jobenv.DefaultEnv when Size is 0.
func (c Config) workerEnv() jobenv.Env {
	if c.Size == 0 {
		return jobenv.DefaultEnv()
	}
	return c.Env
}

// String formats c's place in the job and knobs as the launcher's
// variables, with the secret redacted, and the launcher of its Plan.
func (c Config) String() string {
	return fmt.Sprintf("hvd.Config{%s launcher=%q}", c.Env, c.Plan.Launcher)
}

// Format makes every fmt verb print String, so that no formatting of a
// Config can reveal the secret.
func (c Config) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue makes log/slog record c as the group jobenv.Env records,
// with the secret redacted.
func (c Config) LogValue() slog.Value { return c.Env.LogValue() }
