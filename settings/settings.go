package settings

import (
	"fmt"
	"strings"
	"time"
)

// Defaults of the knobs (see Defaults).
const (
	DefaultFusionThreshold = 64 << 20 // 64 MiB
	DefaultCycleTime       = time.Millisecond
	DefaultCacheCapacity   = 1024
	DefaultStallWarning    = 60 * time.Second
	DefaultStallShutdown   = time.Duration(0) // none of its own: OpTimeout ends a stall
	DefaultOpTimeout       = 10 * time.Minute // bound on every wait for another rank (negotiation and stalls included)
	DefaultStartTimeout    = 30 * time.Second
	DefaultLogLevel        = "info"
)

// Engine holds the knobs of a rank's collective engine. Its zero value
// disables fusion, the response cache, the stall inspector and the
// operation timeout; DefaultEngine gives the defaults. Negative sizes and
// times act as 0 in the engine (the launcher rejects them).
type Engine struct {
	// FusionThreshold is the most bytes of all-reduces packed into one
	// fused batch; 0 disables fusion.
	FusionThreshold int64
	// CycleTime is the longest a rank that is negotiating waits before its
	// next cycle when it has nothing new to propose (names it waits for
	// that other ranks have not submitted are asked about again then). A
	// submission starts a cycle at once; those that arrive while a cycle
	// runs are fused into the next. 0 means DefaultCycleTime.
	CycleTime time.Duration
	// CacheCapacity is the number of response cache entries; 0 disables
	// the cache, so every request is sent in every negotiation.
	CacheCapacity int
	// StallWarning: tensors submitted by some ranks but not others for
	// this long are logged (by rank 0) with the ranks that are missing
	// them, again after twice as long, four times, and so on (at most 16
	// times StallWarning apart) while the stall lasts, and a negotiation that has waited this long for ranks that do
	// not negotiate at all (they have submitted nothing) is logged, by each
	// waiting rank, with the ranks it waits for; 0 disables.
	// StallShutdown: after this long every rank fails its pending
	// operations with the engine's ErrStall, naming the stalled tensors,
	// the ranks that submitted them and the missing ranks; 0 leaves the
	// stall to OpTimeout, which ends it in the same way when it is shorter
	// or StallShutdown is 0 (so a stall lasts forever only when both are
	// 0). For ranks that do not negotiate it acts as OpTimeout does
	// (below, in real time), when it is shorter or OpTimeout is 0, with
	// ErrStall.
	StallWarning, StallShutdown time.Duration
	// OpTimeout bounds every wait of an operation for another rank: each
	// data-plane operation once every rank has submitted it, and each step
	// of the negotiation that decides it. A rank that does not answer the
	// negotiation within OpTimeout (it is stopped or hung, or, since an
	// engine negotiates only while some rank has work, it has submitted
	// nothing for that long while another rank waits with operations) is
	// named in the engine's *NoAnswerError that wraps ErrTimeout; the
	// verdict travels with the negotiation, so every rank still negotiating
	// fails with it. Each of the negotiation's log2(size)+2 or fewer steps
	// allows one OpTimeout more than the step before it (a peer may itself
	// have waited that long), so the ranks fail between OpTimeout and that
	// many times OpTimeout after they began to wait. A rank that waits
	// inside a data-plane operation (or the gather of new requests) names
	// the peer it waited for in an *OpError that wraps ErrTimeout; the
	// other ranks then see that rank leave (ErrPeerGone). A tensor that
	// some ranks submitted and others have not, while those keep
	// negotiating, is a stall: once it has waited OpTimeout (unless
	// StallShutdown is shorter) every rank fails its pending operations
	// with ErrStall wrapping ErrTimeout, naming the tensors and ranks, in
	// the same cycle. Measured in real time (a stall by the engine's
	// clock, which is real time unless a test injects one). 0 means no
	// bound.
	OpTimeout time.Duration
	// Hierarchical chooses the all-reduce, all-gather and broadcast of a
	// job that spans hosts: On runs them in two levels (inside each host,
	// then among hosts, one copy per host across the network), Off keeps
	// the flat ring over every rank, and Auto (the zero value) takes the
	// two levels by a rule measured across emulated hosts (see
	// collective.HierarchyAuto).
	Hierarchical Switch
	// Autotune lets rank 0 try fusion thresholds, cycle times, the
	// hierarchical switch and the response cache while the job trains,
	// scoring each by the bytes all-reduced per second, and keep the best.
	Autotune bool
}

// Switch is a three-way setting: Auto (the zero value) leaves the choice to
// a rule, On and Off force it.
type Switch uint8

// The values of a Switch.
const (
	Auto Switch = iota
	On
	Off
)

// String returns "auto", "on" or "off".
func (s Switch) String() string {
	switch s {
	case Auto:
		return "auto"
	case On:
		return "on"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Switch(%d)", uint8(s))
}

// ParseSwitch reads "auto", "on" or "off" (any case; "1", "true", "0" and
// "false" as on and off, as Horovod's variables are written).
func ParseSwitch(s string) (Switch, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return Auto, nil
	case "on", "1", "true":
		return On, nil
	case "off", "0", "false":
		return Off, nil
	}
	return Auto, fmt.Errorf("settings: %q is not auto, on or off", s)
}

// Knobs is every tuning knob of a job: the engine's, and those the rank
// around it uses. The launcher passes them to every rank unchanged.
type Knobs struct {
	Engine
	// StartTimeout is how long ranks wait for each other to join the job
	// (hvd.Init); it must be positive.
	StartTimeout time.Duration
	// TimelinePath names the file rank 0 writes its timeline (a Chrome
	// trace of every tensor's negotiation and execution) to; "" writes none.
	TimelinePath string
	// LogLevel is the ranks' log/slog level name: debug, info, warn or
	// error (any case, optionally with an offset such as "debug-4").
	LogLevel string
	// NoSharedMemory keeps links between ranks on one host on TCP instead
	// of shared-memory rings.
	NoSharedMemory bool
	// AutotuneLogPath names the CSV file rank 0 writes every autotuning
	// trial to (with Engine.Autotune); "" writes none.
	AutotuneLogPath string
	// TLS encrypts the rendezvous and every data-plane link on TCP with TLS
	// 1.3, its keys bound to the job secret (shared-memory rings are left
	// as they are). Every rank and the launcher must agree.
	TLS bool
	// ProcessSets lists the process sets every rank adds when its runtime
	// starts (hvd.Config.ProcessSets), as ParseProcessSets reads them:
	// "0,2;1,3" is the sets {0, 2} and {1, 3}; "" is none.
	ProcessSets string
	// TCPCongestion names the congestion control of TCP links between
	// ranks on different hosts (see CheckCongestion); "" is Reno, and
	// HostCongestion keeps each host's default.
	TCPCongestion string
}

// DefaultEngine returns the engine knobs at their defaults: 64 MiB fusion,
// 1 ms cycles, 1024 cache entries, a stall warning after 60 s, no stall
// shutdown time of its own, and a 10 min bound on every wait for another
// rank, a stalled tensor's included.
func DefaultEngine() Engine {
	return Engine{
		FusionThreshold: DefaultFusionThreshold,
		CycleTime:       DefaultCycleTime,
		CacheCapacity:   DefaultCacheCapacity,
		StallWarning:    DefaultStallWarning,
		StallShutdown:   DefaultStallShutdown,
		OpTimeout:       DefaultOpTimeout,
	}
}

// Defaults returns every knob at its default: DefaultEngine, a 30 s start
// timeout, no timeline, log level info and shared memory on one host.
func Defaults() Knobs {
	return Knobs{
		Engine:       DefaultEngine(),
		StartTimeout: DefaultStartTimeout,
		LogLevel:     DefaultLogLevel,
	}
}

// Table returns every knob, in the order the ranks' environment lists them.
// A new knob is a field of Knobs (or Engine), its default in Defaults, and
// one entry here; the README's flag table names its flag.
func Table() []Knob {
	return []Knob{
		{Flag: "start-timeout", Var: "GOROVOD_START_TIMEOUT", Category: CategoryJob, Kind: KindNumber,
			Usage:     "how long ranks wait for each other in hvd.Init, and for host checks (Go duration, or seconds)",
			Env:       durationField(func(k *Knobs) *time.Duration { return &k.StartTimeout }),
			FlagValue: secondsField(func(k *Knobs) *time.Duration { return &k.StartTimeout })},
		{Flag: "fusion-threshold-mb", Var: "GOROVOD_FUSION_THRESHOLD", VarNote: ", in bytes", Kind: KindNumber,
			Usage:     "MiB of tensors fused into one all-reduce; 0 disables fusion",
			Env:       int64Field(func(k *Knobs) *int64 { return &k.FusionThreshold }),
			FlagValue: func(k *Knobs) Value { return &mibValue{p: &k.FusionThreshold} }},
		{Flag: "cycle-time-ms", Var: "GOROVOD_CYCLE_TIME", Kind: KindNumber,
			Usage:     "the most milliseconds between negotiation cycles while ranks wait for each other (a submission starts one at once)",
			Env:       durationField(func(k *Knobs) *time.Duration { return &k.CycleTime }),
			FlagValue: func(k *Knobs) Value { return &msValue{p: &k.CycleTime, ms: k.CycleTime.Seconds() * 1e3} }},
		{Flag: "cache-capacity", Var: "GOROVOD_CACHE_CAPACITY", Kind: KindNumber,
			Usage: "response cache entries; 0 disables the cache",
			Env:   intField(func(k *Knobs) *int { return &k.CacheCapacity })},
		{Flag: "stall-check-time", Var: "GOROVOD_STALL_CHECK_TIME", Kind: KindNumber,
			Usage:     "warn about tensors some ranks have not submitted for this long, and again after twice, four times... as long (at most 16 times this apart) while they wait; 0 disables",
			Env:       durationField(func(k *Knobs) *time.Duration { return &k.StallWarning }),
			FlagValue: secondsField(func(k *Knobs) *time.Duration { return &k.StallWarning })},
		{Flag: "stall-shutdown-time", Var: "GOROVOD_STALL_SHUTDOWN_TIME", Kind: KindNumber,
			Usage:     "fail the job on every rank, naming the tensors and ranks, once tensors some ranks submitted have waited this long for the others; 0 leaves it to --op-timeout, which ends a stall too when it is shorter",
			Env:       durationField(func(k *Knobs) *time.Duration { return &k.StallShutdown }),
			FlagValue: secondsField(func(k *Knobs) *time.Duration { return &k.StallShutdown })},
		{Flag: "timeline-filename", Var: "GOROVOD_TIMELINE", TakesFile: true,
			Usage: "write a timeline of the collective operations to this file",
			Env:   textField(func(k *Knobs) *string { return &k.TimelinePath })},
		{Flag: "log-level", Var: "GOROVOD_LOG_LEVEL", Choices: []string{"debug", "info", "warn", "error"},
			Usage: "log level of the ranks and of gorun: debug, info, warn or error (gorun shows warnings at info and warn; --verbose adds its info records)",
			Env:   textField(func(k *Knobs) *string { return &k.LogLevel })},
		{Flag: "op-timeout", Var: "GOROVOD_OP_TIMEOUT", Kind: KindNumber,
			Usage:     "fail the job when a rank waits longer than this for another rank, in a collective or in the negotiation before it; the error names the rank that did not answer. A rank that submits nothing for this long while others wait counts too, and so does a tensor that some ranks submitted and others have not for this long (a stall: every rank fails naming the tensors and ranks), so keep it above the longest work one rank does alone (evaluation, checkpointing); 0 never",
			Env:       durationField(func(k *Knobs) *time.Duration { return &k.OpTimeout }),
			FlagValue: secondsField(func(k *Knobs) *time.Duration { return &k.OpTimeout })},
		boolKnob("no-shared-memory", "GOROVOD_NO_SHARED_MEMORY",
			"keep links between ranks on one host on loopback TCP instead of shared memory",
			func(k *Knobs) *bool { return &k.NoSharedMemory }),
		{Flag: "hierarchical-allreduce", Var: "GOROVOD_HIERARCHICAL_ALLREDUCE", Choices: []string{"auto", "on", "off"},
			Usage:     "all-reduce, all-gather and broadcast in two levels (inside each host, then one copy per host across the network): on, off, or auto (two levels past 32 KiB where every host has the same number of ranks, at least two; broadcast follows the hosts at any size)",
			Env:       func(k *Knobs) Value { return switchValue{&k.Hierarchical} },
			FlagValue: func(k *Knobs) Value { return &switchFlag{p: &k.Hierarchical, text: k.Hierarchical.String()} }},
		boolKnob("autotune", "GOROVOD_AUTOTUNE",
			"let rank 0 tune fusion, cycle time, the hierarchical switch and the cache while the job trains, keeping what moves the most bytes per second",
			func(k *Knobs) *bool { return &k.Autotune }),
		{Flag: "autotune-log", Var: "GOROVOD_AUTOTUNE_LOG", TakesFile: true,
			Usage: "write every autotuning trial to this CSV file",
			Env:   textField(func(k *Knobs) *string { return &k.AutotuneLogPath })},
		boolKnob("tls", "GOROVOD_TLS",
			"encrypt the rendezvous and every TCP link between ranks with TLS 1.3 keyed from the job secret (shared memory on one host stays as it is)",
			func(k *Knobs) *bool { return &k.TLS }),
		{Flag: "process-sets", Var: "GOROVOD_PROCESS_SETS",
			Usage: "process sets every rank adds at hvd.Init, as job ranks: sets separated by ';', ranks by ',' (\"0,2;1,3\")",
			Env:   func(k *Knobs) Value { return processSetsValue{&k.ProcessSets} }},
		{Flag: "tcp-congestion", Var: "GOROVOD_TCP_CONGESTION",
			Usage: "congestion control of the TCP links between ranks on different hosts (Linux's name: reno, cubic, bbr, ...); empty is reno, host keeps each host's default (links on one host always use reno)",
			Env:   func(k *Knobs) Value { return congestionValue{&k.TCPCongestion} }},
	}
}

// boolKnob is a KindBool tuning knob whose variable is 1 or 0.
func boolKnob(flag, name, usage string, field func(*Knobs) *bool) Knob {
	return Knob{Flag: flag, Var: name, Kind: KindBool, Usage: usage, Bool: field,
		Env: func(k *Knobs) Value { return boolValue{field(k)} }}
}
