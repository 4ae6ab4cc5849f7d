package runner

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

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
	// ElasticTimeout is how long an elastic job with a discovery script
	// waits, at the start or after losing ranks (even all of them), for
	// hosts enough for MinNP ranks before it fails (gorun
	// --elastic-timeout); 0 means DefaultElasticTimeout.
	ElasticTimeout time.Duration
}

// DefaultElasticTimeout is Config.ElasticTimeout's default.
const DefaultElasticTimeout = 10 * time.Minute

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

// Validate checks c and returns one error per broken invariant (joined with
// errors.Join), nil if c can be launched. Errors wrap ErrConfig, or the
// sentinel of the host or knob at fault (ErrNumProc, ErrSlots, ErrHosts,
// jobenv.ErrEnv).
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
		}
	}
	errs = append(errs, c.checkHostList())
	check(len(c.Command) > 0, "no program to run")
	check(len(c.Command) == 0 || c.Command[0] != "", "the program name is empty")
	check(c.GracePeriod >= 0, "grace period %v is negative", c.GracePeriod)
	check(c.SSHPort >= 0 && c.SSHPort < 1<<16, "ssh port %d is not in 0..65535", c.SSHPort)
	check(c.SSHConnectTimeout >= 0, "ssh connect timeout %v is negative", c.SSHConnectTimeout)
	errs = append(errs, c.checkLauncher())
	check(c.BindTo == "" || c.BindTo == BindNone || c.BindTo == BindCore, "--bind-to %q: want core or none", c.BindTo)
	for _, kv := range c.ForwardEnv {
		errs = append(errs, checkForward(kv))
	}
	errs = append(errs, c.checkAddrs())
	errs = append(errs, c.jobEnv().Validate())
	check(c.MinNP >= 0 && c.MinNP <= max(c.NP, 1), "--min-np %d is not in 0..%d (-np)", c.MinNP, c.NP)
	check(c.MaxNP == 0 || c.MaxNP >= c.NP, "--max-np %d is below -np %d", c.MaxNP, c.NP)
	check(c.ResetLimit >= 0, "--reset-limit %d is negative", c.ResetLimit)
	check(c.ResetLimit == 0 || c.Elastic(), "--reset-limit needs an elastic job (--min-np, --max-np or --host-discovery-script)")
	check(!c.Elastic() || c.Launcher != SpawnSrun, "an elastic job cannot run its ranks as srun steps")
	check(c.DiscoveryScript == "" || len(c.Hosts) == 0, "give -H (or -hostfile) or --host-discovery-script, not both")
	check(c.SlotsPerHost >= 0, "--slots-per-host %d is negative", c.SlotsPerHost)
	check(c.SlotsPerHost == 0 || c.DiscoveryScript != "", "--slots-per-host needs --host-discovery-script")
	check(c.ElasticTimeout >= 0, "--elastic-timeout %v is negative", c.ElasticTimeout)
	for _, r := range c.OutputRanks {
		check(r >= 0 && (r < c.NP || c.Elastic()), "--output-ranks %d is not a rank of -np %d", r, c.NP)
	}
	return errors.Join(errs...)
}

// checkHostList checks the hosts against NP (see Assign), that an NP
// without hosts fits on this one host, and that no two hosts name this
// machine.
func (c Config) checkHostList() error {
	if len(c.Hosts) == 0 && c.NP > MaxSlotsPerHost {
		return fmt.Errorf("%w: -np %d exceeds the %d ranks one host can run (no -H or -hostfile was given, so all would run on localhost)",
			ErrSlots, c.NP, MaxSlotsPerHost)
	}
	if err := checkAssignArgs(c.hosts(), c.NP); err != nil {
		return err
	}
	return checkLocalAliases(c.Hosts)
}

// checkLauncher checks Launcher, and that SpawnLocal names no remote host.
func (c Config) checkLauncher() error {
	switch c.Launcher {
	case SpawnAuto, SpawnSSH, SpawnSrun:
	case SpawnLocal:
		for _, h := range c.hosts() {
			if !IsLocalHost(h.Name) {
				return fmt.Errorf("%w: launcher local cannot start ranks on host %s", ErrConfig, h.Name)
			}
		}
	default:
		return fmt.Errorf("%w: launcher %q: want local, ssh or srun", ErrConfig, clip(c.Launcher, maxQuoted))
	}
	return nil
}

// checkForward checks one -x entry: "NAME" or "NAME=value", NAME not a
// GOROVOD_* variable.
func checkForward(kv string) error {
	name, _, _ := strings.Cut(kv, "=")
	switch {
	case name == "" || strings.ContainsAny(name, " \t\n\x00"):
		return fmt.Errorf("%w: -x %q: want NAME or NAME=value", ErrConfig, clip(kv, maxQuoted))
	case strings.HasPrefix(name, "GOROVOD_"):
		return fmt.Errorf("%w: -x %s: gorun sets the GOROVOD_ variables itself", ErrConfig, name)
	}
	return nil
}

// checkAddrs checks the form of BindAddr. Whether it is an address of this
// machine, whether NetworkInterface exists, and (with neither) which
// address remote hosts reach are found out when Launch listens.
func (c Config) checkAddrs() error {
	if c.BindAddr == "" {
		return nil
	}
	host, _, err := splitBindAddr(c.BindAddr)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: --bind-addr %s: ranks cannot dial an unspecified address; give an address of this machine", ErrConfig, c.BindAddr)
	}
	return nil
}

// splitBindAddr splits BindAddr into host and port ("0" when absent).
func splitBindAddr(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil { // no port: a bare host or IPv6 address
		host, port = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), "0"
	}
	if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n >= 1<<16 || host == "" {
		return "", "", fmt.Errorf("%w: --bind-addr %q: want host or host:port", ErrConfig, clip(addr, maxQuoted))
	}
	return host, port, nil
}

// hosts returns the host list, localhost with NP slots when none is given.
func (c Config) hosts() []Host {
	if len(c.Hosts) == 0 {
		return []Host{{Name: "localhost", Slots: max(c.NP, 1)}}
	}
	return c.Hosts
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
