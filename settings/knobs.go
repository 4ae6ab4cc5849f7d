package settings

import "time"

// This file is the one table of the knobs: everything that names a field
// of Knobs outside this package (gorun's flags, its config file, --help,
// the man page, completion, the GOROVOD_ variables of the ranks) reads it
// from Table. A new knob is a field of Knobs, its default in Defaults, and
// one entry here.

// Categories of the knobs in gorun's help.
const (
	CategoryJob    = "job"
	CategoryTuning = "tuning (passed to every rank)"
)

// Value is a knob's value as text: String formats it and Set parses it
// into the field it stands for. flag.Value and cli.Generic have this shape.
type Value interface {
	String() string
	Set(s string) error
}

// Checker is a Value that reports, once the command line is read, a value
// that parsed but is out of range: Check's message follows "--flag " ("0:
// want a positive number of milliseconds").
type Checker interface {
	Check() error
}

// Kind says how gorun's flag takes a knob's value.
type Kind uint8

// The kinds of knob.
const (
	KindText   Kind = iota // a word or a path: --help quotes its default
	KindNumber             // a number or a duration
	KindBool               // set or not: the flag takes no value
)

// Knob describes one field of Knobs for every place that names it.
type Knob struct {
	Flag      string   // gorun's flag, and the key of its config file
	Aliases   []string // other names of the flag
	Var       string   // the GOROVOD_ variable that carries it to the ranks
	VarNote   string   // said after the variable in --help where its unit differs from the flag's (", in bytes")
	Category  string   // CategoryTuning or CategoryJob
	Usage     string   // gorun's help text (the variable is appended)
	Choices   []string // the words it takes, if a fixed set (completion offers them)
	TakesFile bool     // its value is a file name
	Kind      Kind

	// Env returns the knob in k as its variable spells it.
	Env func(k *Knobs) Value
	// FlagValue returns it as gorun's flag spells it (MiB, milliseconds, a
	// duration or seconds); nil for KindBool.
	FlagValue func(k *Knobs) Value
	// Bool returns the field of a KindBool knob.
	Bool func(k *Knobs) *bool
}

// Table returns every knob, in the order the ranks' environment lists them.
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
	}
}

// boolKnob is a KindBool tuning knob whose variable is 1 or 0.
func boolKnob(flag, name, usage string, field func(*Knobs) *bool) Knob {
	return Knob{Flag: flag, Var: name, Kind: KindBool, Usage: usage, Bool: field,
		Env: func(k *Knobs) Value { return boolValue{field(k)} }}
}

// HelpCategory returns k's category: CategoryTuning unless it names another.
func (k Knob) HelpCategory() string {
	if k.Category == "" {
		return CategoryTuning
	}
	return k.Category
}

// FlagText returns the knob in knobs as gorun's flag spells it:
// FlagValue, else Env (nil for KindBool, whose flag sets Bool).
func (k Knob) FlagText(knobs *Knobs) Value {
	switch {
	case k.Kind == KindBool:
		return nil
	case k.FlagValue != nil:
		return k.FlagValue(knobs)
	}
	return k.Env(knobs)
}
