package runner

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// Defaults of the launcher settings (see DefaultConfig).
const (
	DefaultGracePeriod       = 3 * time.Second
	DefaultSSHConnectTimeout = 10 * time.Second
)

// Config is one job for Launch: what to run, where, and how.
//
// Start from DefaultConfig: several zero values (CycleTime, StartTimeout)
// are invalid, and others (FusionThreshold, CacheCapacity) switch a feature
// off. Validate reports every broken invariant.
type Config struct {
	// NP is the number of ranks to start (-np).
	NP int
	// Hosts lists the machines and their slots, already parsed (ParseHosts,
	// ReadHostfile). Empty means "localhost" with NP slots (at most
	// MaxSlotsPerHost). This machine may appear once: "localhost",
	// "127.0.0.1", "::1" and its host name (IsLocalHost) are one host, and
	// listing two of them is an error, since their ranks would share local
	// ranks (and GPUs).
	Hosts []Host
	// Command is the program and its arguments, run once per rank.
	Command []string
	// Dir is the ranks' working directory; "" means gorun's.
	Dir string

	// Knobs are the tuning knobs passed to every rank (see jobenv.Env).
	// Their StartTimeout also bounds the pre-launch host checks, and their
	// LogLevel is gorun's too (see Logger).
	settings.Knobs

	// BindAddr is the address (IP or host name, optionally host:port) the
	// rendezvous service listens on and ranks dial. Empty means the first
	// address of NetworkInterface; else 127.0.0.1 when every host is local;
	// else the local address of this machine's route to the remote hosts,
	// checked during start-up (see Launch). It must be an address of this
	// machine.
	BindAddr string
	// NetworkInterface names the network interface (eth0) that carries the
	// job: the rendezvous listens on its address unless BindAddr is set, and
	// ranks bind their data plane to the interface of that name on their
	// host. Empty: ranks choose the interface of their route to the
	// rendezvous.
	NetworkInterface string

	// OutputDir, if set, receives DIR/rank.RR/stdout and DIR/rank.RR/stderr
	// for every rank R, unprefixed, in addition to the terminal output.
	OutputDir string
	// OutputRanks, if not nil, are the ranks whose output the terminal
	// shows (gorun --output-ranks); the others' still goes to OutputDir.
	OutputRanks []int
	// MetricsDir, if set, receives DIR/metrics.jsonl: every scalar the
	// ranks publish (hvd.LogScalars), their runtime series and the job's
	// events, one JSON object a line (see metrics.Writer), at most
	// metrics.DefaultWriterLimit bytes (gorun --metrics-dir).
	MetricsDir string
	// Metrics, if not nil, is the Store that receives the ranks' metrics
	// and the job's events (for a dashboard): Launch marks it ended when
	// the job is over and leaves closing it to the caller, who makes it
	// with NewMetricsStore (which opens MetricsDir's file). With Metrics
	// nil and MetricsDir set, Launch makes and closes one itself.
	Metrics *metrics.Store
	// Dashboard, if set, is the address (host:port) on which gorun serves
	// the job's live dashboard, its /metrics for Prometheus and its JSON
	// (gorun --dashboard; see package internal/dashboard). An empty host
	// means 127.0.0.1; off loopback every request needs the token in the
	// URL that gorun prints at the start.
	Dashboard string
	// DashboardLinger is how long gorun keeps serving the dashboard after
	// the job ended, before it exits (gorun --dashboard-linger); a signal
	// ends the wait at once. The exit status stays the job's.
	DashboardLinger time.Duration
	// TimestampOutput puts the time (UTC, milliseconds) before every line
	// on the terminal (gorun --prefix-output-with-timestamp).
	TimestampOutput bool
	// Verbose logs the slot plan and every spawn command (without the secret).
	Verbose bool
	// ForwardEnv lists variables to pass to every rank (-x): "NAME" takes
	// gorun's value (skipped when unset), "NAME=value" sets one. Local
	// ranks inherit gorun's whole environment anyway.
	ForwardEnv []string

	// BindTo is BindCore to run each rank on its own block of its host's
	// processors, or BindNone ("" too) to let the kernel place ranks (gorun
	// --bind-to). Either way every rank's ThreadVars default to its share
	// of its host's processors (see CPUShare).
	BindTo string

	// SSHPort is the ssh port of remote hosts; 0 means ssh's default.
	SSHPort int
	// SSHIdentityFile is the private key ssh uses; "" means ssh's default.
	SSHIdentityFile string
	// SSHConnectTimeout bounds each ssh connection attempt; 0 means ssh's default.
	SSHConnectTimeout time.Duration

	// GracePeriod is how long a rank being stopped has between SIGTERM and
	// SIGKILL.
	GracePeriod time.Duration
	// Stdout and Stderr receive the ranks' prefixed output; nil means
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Logger receives gorun's own logs. Nil means text on Stderr at warn
	// level (gorun's info records are the Verbose detail), lowered to debug
	// when LogLevel is debug, raised to error when it is error, and lowered
	// to info at most when Verbose.
	Logger *slog.Logger
	// Launcher says how ranks are started: SpawnAuto ("": local hosts
	// locally, others over ssh), SpawnLocal, SpawnSSH (every host, this one
	// too) or SpawnSrun (every rank as a step of the Slurm allocation gorun
	// runs in; see SlurmAllocation for its hosts).
	Launcher string
	// SpawnerFor picks the spawner for the ranks of host, overriding
	// Launcher. Nil means the spawners that Launcher names.
	SpawnerFor func(host string) Spawner

	// MinNP > 0 makes the job elastic (gorun --min-np): a rank that fails
	// does not stop it; the others form the job anew without it and train
	// on from their last commit (see hvd.RunElastic), as long as at least
	// MinNP ranks are left. The program must run its training through
	// hvd.RunElastic.
	MinNP int
	// ResetLimit, in an elastic job, is how many times it may be formed
	// anew after a failure before the next failure stops it; 0 means no
	// limit (gorun --reset-limit).
	ResetLimit int
	// MaxNP > 0 makes the job elastic too (gorun --max-np): it grows, as
	// hosts with free slots are found, up to MaxNP ranks; 0 means NP.
	MaxNP int
	// DiscoveryScript makes the job elastic too (gorun
	// --host-discovery-script): an executable that prints the hosts
	// available now, "host:slots" or "host" per line (SlotsPerHost slots,
	// default 1), instead of Hosts. gorun runs it at the start and every
	// second: ranks start on hosts that appear (up to MaxNP), and stop on
	// hosts that disappear. One run is bounded (see DiscoverHosts).
	DiscoveryScript string
	SlotsPerHost    int
	// PS > 0 makes the job a parameter-server job (gorun --ps): NP workers,
	// PS parameter servers and a chief, Size 1+NP+PS ranks of the same
	// program, each with GOROVOD_PS_SERVERS=PS (see jobenv.DetectTask;
	// package ps runs them). The servers and the workers take slots
	// (AssignPS); the chief runs on the first host beside them without
	// taking one. A worker that fails does not stop the job; a server that
	// ends before the chief, or a chief that fails, does (see Launch).
	PS int
	// Evaluator, in a parameter-server job, starts one more process of the
	// program on the first host, outside the ranks and without taking a
	// slot, with GOROVOD_ROLE=evaluator (gorun --evaluator): the sidecar
	// evaluator (package evaluator). Its output is prefixed
	// "[evaluator]" and goes to DIR/evaluator with OutputDir.
	Evaluator bool
	// EvaluatorTimeout is how long the evaluator may run on after the chief
	// has ended before it gets SIGTERM (gorun --evaluator-timeout); 0 means
	// DefaultEvaluatorTimeout.
	EvaluatorTimeout time.Duration

	// ElasticTimeout is how long an elastic job with a discovery script
	// waits, at the start or after losing ranks (even all of them), for
	// hosts enough for MinNP ranks before it fails (gorun
	// --elastic-timeout); 0 means DefaultElasticTimeout.
	ElasticTimeout time.Duration
}

// DefaultElasticTimeout is Config.ElasticTimeout's default.
const DefaultElasticTimeout = 10 * time.Minute

// DefaultEvaluatorTimeout is Config.EvaluatorTimeout's default.
const DefaultEvaluatorTimeout = 5 * time.Minute

// Elastic reports whether c describes an elastic job.
func (c Config) Elastic() bool { return c.MinNP > 0 || c.MaxNP > 0 || c.DiscoveryScript != "" }

// DefaultConfig returns a Config with every setting at its default: one
// rank on localhost, no command yet.
func DefaultConfig() Config {
	return Config{
		NP:                1,
		Knobs:             settings.Defaults(),
		SSHConnectTimeout: DefaultSSHConnectTimeout,
		GracePeriod:       DefaultGracePeriod,
	}
}

// hosts returns the host list, localhost with NP slots (NP+PS in a
// parameter-server job) when none is given.
func (c Config) hosts() []Host {
	if len(c.Hosts) == 0 {
		return []Host{{Name: "localhost", Slots: max(c.NP+max(c.PS, 0), 1)}}
	}
	return c.Hosts
}

// size is the number of ranks the job starts: NP, or in a parameter-server
// job a chief, NP workers and PS servers.
func (c Config) size() int {
	if c.PS > 0 {
		return 1 + c.NP + c.PS
	}
	return c.NP
}

// jobEnv returns the worker environment shared by every rank of the job:
// the knobs, without identity, address or secret.
func (c Config) jobEnv() jobenv.Env {
	e := jobenv.DefaultEnv()
	e.BindAddr = c.NetworkInterface
	e.Knobs = c.Knobs
	return e
}

// gorunLevel is the level of gorun's own default logger (see Logger): warn,
// or LogLevel where that is debug (or lower) or error (or higher), and at
// most info when Verbose. A bad LogLevel (which Validate reports) counts as
// info.
func (c Config) gorunLevel() slog.Level {
	level := slog.LevelWarn
	if l, err := (jobenv.Env{Knobs: c.Knobs}).SlogLevel(); err == nil && (l < slog.LevelInfo || l > slog.LevelWarn) {
		level = l
	}
	if c.Verbose {
		level = min(level, slog.LevelInfo)
	}
	return level
}

// withDefaults fills in the writers, and the working directory.
func (c Config) withDefaults() (Config, error) {
	if c.Elastic() && c.MinNP == 0 {
		c.MinNP = c.NP
	}
	if c.EvaluatorTimeout == 0 {
		c.EvaluatorTimeout = DefaultEvaluatorTimeout
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Dir == "" {
		dir, err := os.Getwd()
		if err != nil {
			return c, fmt.Errorf("runner: working directory: %w", err)
		}
		c.Dir = dir
	}
	return c, nil
}

// logger returns c.Logger, or a text logger on c.Stderr at the level that
// LogLevel and Verbose give gorun (see Config.Logger).
func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.NewTextHandler(c.Stderr, &slog.HandlerOptions{Level: c.gorunLevel()}))
}
