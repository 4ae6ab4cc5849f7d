package jobenv

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/settings"
)

// This file is the launcher–worker environment contract: the only place the
// GOROVOD_* variables are named, written (Environ) and read (FromEnviron).

// Names of the environment variables that gorun sets for every worker.
// The first ten say who the worker is and how it reaches the others; the
// rest carry the fields of settings.Knobs (named in the comments), and an
// unset or empty one keeps its default (settings.Defaults). A knob's
// variable is defined in settings.Table, which Environ and FromEnviron
// follow; the constants here name the knobs that code refers to.
const (
	EnvRank              = "GOROVOD_RANK"                   // global rank
	EnvSize              = "GOROVOD_SIZE"                   // number of ranks
	EnvLocalRank         = "GOROVOD_LOCAL_RANK"             // rank among the ranks on this host
	EnvLocalSize         = "GOROVOD_LOCAL_SIZE"             // number of ranks on this host
	EnvCrossRank         = "GOROVOD_CROSS_RANK"             // host position among hosts with this local rank
	EnvCrossSize         = "GOROVOD_CROSS_SIZE"             // number of hosts with this local rank
	EnvHostname          = "GOROVOD_HOSTNAME"               // host name from the host list
	EnvRendezvousAddr    = "GOROVOD_RENDEZVOUS_ADDR"        // host:port of the rendezvous service
	EnvSecret            = "GOROVOD_SECRET"                 // job secret, hex
	EnvBindAddr          = "GOROVOD_BIND_ADDR"              // data-plane listen address or interface
	EnvStartTimeout      = "GOROVOD_START_TIMEOUT"          // StartTimeout: Go duration
	EnvFusionThreshold   = "GOROVOD_FUSION_THRESHOLD"       // FusionThreshold: bytes
	EnvCycleTime         = "GOROVOD_CYCLE_TIME"             // CycleTime: Go duration
	EnvCacheCapacity     = "GOROVOD_CACHE_CAPACITY"         // CacheCapacity: entries
	EnvStallCheckTime    = "GOROVOD_STALL_CHECK_TIME"       // StallWarning: Go duration
	EnvStallShutdownTime = "GOROVOD_STALL_SHUTDOWN_TIME"    // StallShutdown: Go duration
	EnvTimeline          = "GOROVOD_TIMELINE"               // TimelinePath: file path
	EnvLogLevel          = "GOROVOD_LOG_LEVEL"              // LogLevel: debug, info, warn, error
	EnvOpTimeout         = "GOROVOD_OP_TIMEOUT"             // OpTimeout: Go duration
	EnvNoSharedMemory    = "GOROVOD_NO_SHARED_MEMORY"       // NoSharedMemory: 1 keeps same-host links on TCP, 0 (default) uses shared memory
	EnvHierarchical      = "GOROVOD_HIERARCHICAL_ALLREDUCE" // Hierarchical: auto (default), on or off
	EnvAutotune          = "GOROVOD_AUTOTUNE"               // Autotune: 1 tunes the knobs while the job trains, 0 (default) does not
	EnvAutotuneLog       = "GOROVOD_AUTOTUNE_LOG"           // AutotuneLogPath: CSV file of the autotuner's trials
	EnvTLS               = "GOROVOD_TLS"                    // TLS: 1 encrypts the rendezvous and the TCP links, 0 (default) does not
)

// EnvElasticID is set by gorun in the ranks of an elastic job (--min-np)
// only: the worker's name in the job's generations (Generation),
// which hvd.RunElastic looks itself up by.
const EnvElasticID = "GOROVOD_ELASTIC_ID"

// Variables of a parameter-server job (read by DetectTask). gorun sets
// EnvPSServers in every rank (empty in an all-reduce job) and EnvRole in
// the evaluator (empty in the ranks); under
// another launcher of ranks (Slurm, mpirun, torchrun style, a
// GOROVOD_CLUSTER spec) the user sets EnvPSServers for every rank. They
// are not tuning knobs: Env does not carry them.
const (
	EnvPSServers = "GOROVOD_PS_SERVERS" // N ≥ 1: a PS job; rank 0 is the chief, the last N ranks are parameter servers, the others workers
	EnvRole      = "GOROVOD_ROLE"       // "evaluator": the sidecar evaluator, which is not a rank
)

// Variables that gorun never writes, read by Detect when another launcher
// (Slurm, mpirun, torchrun, a cluster spec, TF_CONFIG) started the process.
const (
	EnvSecretFile     = "GOROVOD_SECRET_FILE"     // file holding the job secret (64 hex digits), mode 0600 or stricter
	EnvRendezvousPort = "GOROVOD_RENDEZVOUS_PORT" // port rank 0 serves the rendezvous on
	EnvCluster        = "GOROVOD_CLUSTER"         // cluster spec: JSON, or @file
	EnvClusterIndex   = "GOROVOD_CLUSTER_INDEX"   // this process's index (rank) in the cluster spec
	EnvTFConfig       = "TF_CONFIG"               // TensorFlow's cluster spec (see TFConfig), as Kubeflow's TFJob sets it
)

// Env is what one worker process learns from its environment: who it
// is in the job, how to reach the others, and the tuning knobs.
type Env struct {
	Rank, Size           int // global rank and number of ranks
	LocalRank, LocalSize int // rank and number of ranks on this host
	CrossRank, CrossSize int // position among, and number of, hosts with this LocalRank

	Hostname       string // this worker's host as named in the host list ("" if unknown)
	RendezvousAddr string // host:port of the rendezvous service; "" for a single rank
	Secret         []byte // job secret (auth.SecretSize bytes); never printed
	BindAddr       string // address or interface for the data plane; "" = auto

	// Knobs are the job's tuning knobs, the same on every rank (see
	// settings.Knobs; their variables are listed in envVars).
	settings.Knobs
}

// DefaultEnv returns the environment of a single rank (rank 0 of 1,
// on one host) with every knob at its default (settings.Defaults).
func DefaultEnv() Env {
	return Env{Size: 1, LocalSize: 1, CrossSize: 1, Knobs: settings.Defaults()}
}

// ForSlot returns a copy of e with the identity of slot s: its ranks, sizes
// and host name. The launcher starts from one Env per job (addresses,
// secret, knobs) and derives each rank's with ForSlot.
func (e Env) ForSlot(s Slot) Env {
	e.Rank, e.Size = s.Rank, s.Size
	e.LocalRank, e.LocalSize = s.LocalRank, s.LocalSize
	e.CrossRank, e.CrossSize = s.CrossRank, s.CrossSize
	e.Hostname = s.Host
	return e
}

// Environ returns every variable of the contract as "NAME=value" entries,
// ready to append to os.Environ() for a worker. It includes the secret:
// never log the result without RedactEnviron.
func (e Env) Environ() []string {
	vars := envVars()
	kv := make([]string, len(vars))
	for i, v := range vars {
		kv[i] = v.name + "=" + v.get(&e)
	}
	return kv
}

// SidecarEnviron returns the contract of a process of the job that is not
// a rank (gorun --evaluator's evaluator): Environ without the ranks, the
// sizes and the rendezvous address, so that it keeps the host name, the
// secret, the bind address and the knobs. Like Environ it includes the
// secret.
func (e Env) SidecarEnviron() []string {
	var kv []string
	for _, v := range envVars() {
		if v.identity && !v.secret {
			continue
		}
		kv = append(kv, v.name+"="+v.get(&e))
	}
	return kv
}

// FromEnviron reads the contract through getenv (os.Getenv in a worker).
// present reports whether GOROVOD_RANK is set. Without it the result is a
// single rank (DefaultEnv) with any knobs that are set applied, and
// setting an identity variable (size, local and cross numbers, rendezvous
// address, secret) without GOROVOD_RANK is an error. With it, the six rank
// and size variables are required. Unset or empty knobs keep their defaults.
// A value that does not parse is an error naming the variable and its value
// (never the secret's); the result is then checked with Validate.
func FromEnviron(getenv func(string) string) (env Env, present bool, err error) {
	env = DefaultEnv()
	present = getenv(EnvRank) != ""
	var errs []error
	for _, v := range envVars() {
		s := getenv(v.name)
		switch {
		case s == "" && v.identity && present && v.required:
			errs = append(errs, fmt.Errorf("%w: %s is not set (%s is)", ErrEnv, v.name, EnvRank))
		case s == "":
			continue
		case v.identity && !present:
			errs = append(errs, fmt.Errorf("%w: %s is set but %s is not", ErrEnv, v.name, EnvRank))
		default:
			if perr := v.set(&env, s); perr != nil {
				errs = append(errs, fmt.Errorf("%w: %s=%s: %w", ErrEnv, v.name, v.quote(s), perr))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, env.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return Env{}, present, err
	}
	return env, present, nil
}

// Set gives the variable name of the contract the value s, as FromEnviron
// reads it. A value that does not parse, or a name that is not the
// contract's, is an error wrapping ErrEnv that names the variable and the
// value (never the secret's). Set does not Validate e.
func (e *Env) Set(name, s string) error {
	for _, v := range envVars() {
		if v.name != name {
			continue
		}
		if err := v.set(e, s); err != nil {
			return fmt.Errorf("%w: %s=%s: %w", ErrEnv, v.name, v.quote(s), err)
		}
		return nil
	}
	return fmt.Errorf("%w: %s is not a variable of the contract", ErrEnv, name)
}

// Validate checks the invariants of e and returns one error per broken
// invariant (joined with errors.Join), each wrapping ErrEnv; nil if e is sound.
func (e Env) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrEnv}, args...)...))
		}
	}
	e.checkIdentity(check)
	e.checkKnobs(check)
	return errors.Join(errs...)
}

// checkFunc records a broken invariant when ok is false.
type checkFunc func(ok bool, format string, args ...any)

// checkIdentity checks the ranks, sizes, addresses and secret.
func (e Env) checkIdentity(check checkFunc) {
	check(e.Size >= 1, "%s=%d: must be at least 1", EnvSize, e.Size)
	check(0 <= e.Rank && e.Rank < e.Size, "%s=%d: must be in [0, %s=%d)", EnvRank, e.Rank, EnvSize, e.Size)
	check(1 <= e.LocalSize && e.LocalSize <= e.Size, "%s=%d: must be in [1, %s=%d]", EnvLocalSize, e.LocalSize, EnvSize, e.Size)
	check(0 <= e.LocalRank && e.LocalRank < e.LocalSize, "%s=%d: must be in [0, %s=%d)", EnvLocalRank, e.LocalRank, EnvLocalSize, e.LocalSize)
	check(1 <= e.CrossSize && e.CrossSize <= e.Size, "%s=%d: must be in [1, %s=%d]", EnvCrossSize, e.CrossSize, EnvSize, e.Size)
	check(0 <= e.CrossRank && e.CrossRank < e.CrossSize, "%s=%d: must be in [0, %s=%d)", EnvCrossRank, e.CrossRank, EnvCrossSize, e.CrossSize)
	check(e.Size <= 1 || e.RendezvousAddr != "", "%s=%d: more than one rank needs %s", EnvSize, e.Size, EnvRendezvousAddr)
	check(e.RendezvousAddr == "" || isHostPort(e.RendezvousAddr), "%s=%q: want host:port", EnvRendezvousAddr, clip(e.RendezvousAddr, maxQuoted))
	if len(e.Secret) != 0 {
		check(len(e.Secret) == auth.SecretSize, "%s: secret is %d bytes, want %d", EnvSecret, len(e.Secret), auth.SecretSize)
	} else {
		check(e.RendezvousAddr == "", "%s is set but %s is not", EnvRendezvousAddr, EnvSecret)
	}
}

// checkKnobs checks the tuning knobs and that no text value holds a NUL byte
// (which no environment variable can carry).
func (e Env) checkKnobs(check checkFunc) {
	check(e.StartTimeout > 0, "%s=%v: must be positive", EnvStartTimeout, e.StartTimeout)
	check(e.FusionThreshold >= 0, "%s=%d: must not be negative", EnvFusionThreshold, e.FusionThreshold)
	check(e.CycleTime > 0, "%s=%v: must be positive", EnvCycleTime, e.CycleTime)
	check(e.CacheCapacity >= 0, "%s=%d: must not be negative", EnvCacheCapacity, e.CacheCapacity)
	check(e.StallWarning >= 0, "%s=%v: must not be negative", EnvStallCheckTime, e.StallWarning)
	check(e.StallShutdown >= 0, "%s=%v: must not be negative", EnvStallShutdownTime, e.StallShutdown)
	check(e.StallShutdown <= 0 || e.StallWarning <= 0 || e.StallShutdown >= e.StallWarning,
		"%s=%v: must not be shorter than %s=%v", EnvStallShutdownTime, e.StallShutdown, EnvStallCheckTime, e.StallWarning)
	check(e.OpTimeout >= 0, "%s=%v: must not be negative", EnvOpTimeout, e.OpTimeout)
	_, err := e.SlogLevel()
	check(err == nil, "%s=%q: want debug, info, warn or error", EnvLogLevel, clip(e.LogLevel, maxQuoted))
	for _, v := range envVars() {
		check(v.secret || !strings.ContainsRune(v.get(&e), 0), "%s: value holds a NUL byte", v.name)
	}
}

// isHostPort reports whether s has the form host:port with a numeric port.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && 0 < n && n < 1<<16
}

// SlogLevel returns the log/slog level named by LogLevel ("debug", "info",
// "warn", "error", any case, optionally with an offset such as "debug-4").
func (e Env) SlogLevel() (slog.Level, error) { return slogLevel(e.LogLevel) }

// slogLevel returns the log/slog level that name names (see SlogLevel).
func slogLevel(name string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return 0, fmt.Errorf("%w: %s=%q: %w", ErrEnv, EnvLogLevel, clip(name, maxQuoted), err)
	}
	return l, nil
}

// redacted replaces the secret's value wherever the contract is printed.
const redacted = "<redacted>"

// RedactEnviron returns a copy of kv ("NAME=value" entries) in which the
// value of GOROVOD_SECRET, if not empty, is replaced by "<redacted>". Use it
// before logging a worker's environment.
func RedactEnviron(kv []string) []string {
	out := make([]string, len(kv))
	for i, entry := range kv {
		if name, value, _ := strings.Cut(entry, "="); name == EnvSecret && value != "" {
			entry = name + "=" + redacted
		}
		out[i] = entry
	}
	return out
}

// String formats e as its environment entries, with the secret redacted.
func (e Env) String() string {
	return "Env{" + strings.Join(RedactEnviron(e.Environ()), " ") + "}"
}

// Format makes every fmt verb (%v, %+v, %#v, %x, %d, ...) print String, so
// that no formatting of a Env can reveal the secret.
func (e Env) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(e.String())) }

// LogValue makes log/slog record e as a group of its variables (named
// without the GOROVOD_ prefix, in lower case), with the secret redacted.
func (e Env) LogValue() slog.Value {
	vars := envVars()
	attrs := make([]slog.Attr, len(vars))
	for i, v := range vars {
		value := v.get(&e)
		if v.secret && value != "" {
			value = redacted
		}
		attrs[i] = slog.String(strings.ToLower(strings.TrimPrefix(v.name, "GOROVOD_")), value)
	}
	return slog.GroupValue(attrs...)
}

// envVar binds one environment variable to one field of Env.
type envVar struct {
	name     string
	identity bool // describes the rank in a job: set only together with EnvRank
	required bool // must be set when EnvRank is
	secret   bool // its value never appears in messages
	get      func(e *Env) string
	set      func(e *Env, s string) error
}

// quote shows a value in an error message, hiding a secret one.
func (v envVar) quote(s string) string {
	if v.secret {
		return fmt.Sprintf("<%d characters, redacted>", len(s))
	}
	return strconv.Quote(clip(s, maxQuoted))
}

// envVars lists the contract: every variable, in the order Environ writes
// them: the identity, then the knobs of settings.Table.
func envVars() []envVar {
	vars := []envVar{
		rankVar(EnvRank, func(e *Env) *int { return &e.Rank }),
		rankVar(EnvSize, func(e *Env) *int { return &e.Size }),
		rankVar(EnvLocalRank, func(e *Env) *int { return &e.LocalRank }),
		rankVar(EnvLocalSize, func(e *Env) *int { return &e.LocalSize }),
		rankVar(EnvCrossRank, func(e *Env) *int { return &e.CrossRank }),
		rankVar(EnvCrossSize, func(e *Env) *int { return &e.CrossSize }),
		stringVar(EnvHostname, func(e *Env) *string { return &e.Hostname }),
		identityVar(stringVar(EnvRendezvousAddr, func(e *Env) *string { return &e.RendezvousAddr })),
		identityVar(secretVar(EnvSecret)),
		stringVar(EnvBindAddr, func(e *Env) *string { return &e.BindAddr }),
	}
	for _, k := range settings.Table() {
		vars = append(vars, envVar{name: k.Var,
			get: func(e *Env) string { return k.Env(&e.Knobs).String() },
			set: func(e *Env, s string) error { return k.Env(&e.Knobs).Set(s) },
		})
	}
	return vars
}

// rankVar is a required identity integer (ranks and sizes).
func rankVar(name string, field func(*Env) *int) envVar {
	v := identityVar(envVar{name: name,
		get: func(e *Env) string { return strconv.Itoa(*field(e)) },
		set: func(e *Env, s string) (err error) { *field(e), err = settings.ParseInt[int](s); return err },
	})
	v.required = true
	return v
}

// identityVar marks v as part of a rank's identity.
func identityVar(v envVar) envVar {
	v.identity = true
	return v
}

// stringVar binds a string taken as is.
func stringVar(name string, field func(*Env) *string) envVar {
	return envVar{name: name,
		get: func(e *Env) string { return *field(e) },
		set: func(e *Env, s string) error { *field(e) = s; return nil },
	}
}

// secretVar binds the job secret, hex-encoded.
func secretVar(name string) envVar {
	return envVar{name: name, secret: true,
		get: func(e *Env) string { return hex.EncodeToString(e.Secret) },
		set: func(e *Env, s string) error {
			b, err := hex.DecodeString(s)
			if err != nil {
				return errors.New("not hexadecimal")
			}
			e.Secret = b
			return nil
		},
	}
}
