package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner"
)

// Flag categories; the help lists them in alphabetical order.
const (
	catJob    = "job"
	catHosts  = "hosts"
	catOutput = "output"
	catTuning = "tuning (passed to every rank)"
	catInfo   = "information (print and exit)"
)

// flags returns gorun's flags. Values are new on every call, so that each
// run of the app starts from the defaults.
func flags() []cli.Flag {
	def := runner.DefaultConfig()
	return []cli.Flag{
		&cli.IntFlag{Name: "np", Aliases: []string{"n", "num-proc"}, Category: catJob, Usage: "number of ranks to start (-n and --num-proc, as mpirun and horovodrun spell it, work too)",
			DefaultText: "all the slots of -H or -hostfile"},
		&cli.GenericFlag{Name: "start-timeout", Category: catJob, Value: &duration{def.StartTimeout},
			Usage: "how long ranks wait for each other in hvd.Init, and for host checks (Go duration, or seconds) [$GOROVOD_START_TIMEOUT]"},
		&cli.StringFlag{Name: "config-file", Category: catJob, TakesFile: true,
			Usage: "read flags from this YAML file, keys named like the flags (np: 4, hosts: [a:2, b:2], fusion-threshold-mb: 32; fusion_threshold_mb too); a flag on the command line wins over the file, the file over GOROVOD_ variables; 1 MiB at most"},
		&cli.StringFlag{Name: "bind-to", Category: catJob, Value: "none",
			Usage: "core: bind each rank to its own share of its host's processors (contiguous blocks, processors ÷ ranks on the host each); none: let the kernel place them"},
		&cli.StringSliceFlag{Name: "x", Category: catJob,
			Usage: "pass environment variable NAME (or set NAME=value) to every rank; repeatable, NAME1,NAME2 allowed"},
		&cli.IntFlag{Name: "min-np", Category: catJob,
			Usage:       "make the job elastic: a rank that fails does not stop it while at least this many ranks are left; the others form the job anew and train on from their last commit (the program must train through hvd.RunElastic)",
			DefaultText: "not elastic"},
		&cli.IntFlag{Name: "reset-limit", Category: catJob,
			Usage: "how many times an elastic job may be formed anew after failures before the next failure stops it", DefaultText: "no limit"},
		&cli.IntFlag{Name: "max-np", Category: catJob,
			Usage: "make the job elastic and let it grow to this many ranks as hosts with free slots appear", DefaultText: "-np"},
		&cli.StringFlag{Name: "host-discovery-script", Category: catHosts, TakesFile: true,
			Usage: "make the job elastic, its hosts what this executable prints (host:slots or host per line), run at the start and every second: ranks start on hosts that appear and stop on hosts that go (instead of -H); one run may take 10s and print 1 MiB, else its process group is killed"},
		&cli.IntFlag{Name: "slots-per-host", Category: catHosts, Usage: "slots of a host the discovery script lists without a count", DefaultText: "1"},
		&cli.GenericFlag{Name: "elastic-timeout", Category: catJob, Value: &duration{runner.DefaultElasticTimeout},
			Usage: "how long an elastic job with a discovery script waits for hosts enough for --min-np ranks, at the start or after losing ranks, before it fails (Go duration, or seconds)"},

		&cli.StringSliceFlag{Name: "hosts", Aliases: []string{"H"}, Category: catHosts,
			Usage:       "hosts and their slots: host1:2,host2:2; list this machine once (localhost, 127.0.0.1, ::1 and its name are one host)",
			DefaultText: "localhost with -np slots"},
		&cli.StringFlag{Name: "hostfile", Category: catHosts, TakesFile: true,
			Usage: `file with one "host slots=N" per line (instead of -H); 1 MiB at most, lines 64 KiB`},
		&cli.StringFlag{Name: "launcher", Category: catHosts, Value: "auto",
			Usage: "how ranks start: auto (srun inside a Slurm allocation when no hosts are given; else local hosts locally, others over ssh), local, ssh or srun"},
		&cli.StringFlag{Name: "bind-addr", Category: catHosts,
			Usage: "address of this host that ranks reach the rendezvous on (default: the local address of the route to the remote hosts, checked at start-up)"},
		&cli.StringFlag{Name: "network-interface", Category: catHosts,
			Usage: "network interface (eth0) for the rendezvous and the ranks' data plane"},
		&cli.IntFlag{Name: "ssh-port", Aliases: []string{"p"}, Category: catHosts, Usage: "ssh port of remote hosts",
			DefaultText: "ssh's"},
		&cli.StringFlag{Name: "ssh-identity-file", Aliases: []string{"i"}, Category: catHosts, TakesFile: true,
			Usage: "ssh private key for remote hosts", DefaultText: "ssh's"},

		&cli.StringFlag{Name: "output-filename", Category: catOutput, TakesFile: true,
			Usage: "also write each rank's output to DIR/rank.RR/stdout and DIR/rank.RR/stderr"},
		&cli.StringFlag{Name: "output-ranks", Category: catOutput,
			Usage: "show only these ranks' output on the terminal, comma separated (0 or 0,3); all still go to --output-filename", DefaultText: "all"},
		&cli.BoolFlag{Name: "prefix-output-with-timestamp", Category: catOutput, Usage: "put the time (UTC, milliseconds) before every line of the ranks' output on the terminal"},
		&cli.BoolFlag{Name: "verbose", Category: catOutput, Usage: "log the rank placement and the commands run, at info level (write --verbose=false to unset)"},

		&cli.BoolFlag{Name: "check-build", Category: catInfo,
			Usage: "print what this build of gorun supports (transports, shared memory, CUDA, kernels, launchers) and exit"},
		&cli.StringFlag{Name: "completion", Category: catInfo,
			Usage: "print a completion script for this shell (bash or zsh) and exit: source <(gorun --completion bash)"},
		&cli.BoolFlag{Name: "man", Category: catInfo, Usage: "print gorun's manual page (roff) and exit: gorun --man | man -l -"},

		&cli.IntFlag{Name: "fusion-threshold-mb", Category: catTuning, Value: int(def.FusionThreshold >> 20),
			Usage: "MiB of tensors fused into one all-reduce; 0 disables fusion [$GOROVOD_FUSION_THRESHOLD, in bytes]"},
		&cli.Float64Flag{Name: "cycle-time-ms", Category: catTuning, Value: float64(def.CycleTime) / float64(time.Millisecond),
			Usage: "the most milliseconds between negotiation cycles while ranks wait for each other (a submission starts one at once) [$GOROVOD_CYCLE_TIME]"},
		&cli.IntFlag{Name: "cache-capacity", Category: catTuning, Value: def.CacheCapacity,
			Usage: "response cache entries; 0 disables the cache [$GOROVOD_CACHE_CAPACITY]"},
		&cli.GenericFlag{Name: "stall-check-time", Category: catTuning, Value: &duration{def.StallWarning},
			Usage: "warn about tensors some ranks have not submitted for this long, and again after twice, four times... as long (at most 16 times this apart) while they wait; 0 disables [$GOROVOD_STALL_CHECK_TIME]"},
		&cli.GenericFlag{Name: "stall-shutdown-time", Category: catTuning, Value: &duration{def.StallShutdown},
			Usage: "fail the job on every rank, naming the tensors and ranks, once tensors some ranks submitted have waited this long for the others; 0 leaves it to --op-timeout, which ends a stall too when it is shorter [$GOROVOD_STALL_SHUTDOWN_TIME]"},
		&cli.StringFlag{Name: "timeline-filename", Category: catTuning, TakesFile: true,
			Usage: "write a timeline of the collective operations to this file [$GOROVOD_TIMELINE]"},
		&cli.StringFlag{Name: "log-level", Category: catTuning, Value: def.LogLevel,
			Usage: "log level of the ranks and of gorun: debug, info, warn or error (gorun shows warnings at info and warn; --verbose adds its info records) [$GOROVOD_LOG_LEVEL]"},
		&cli.GenericFlag{Name: "op-timeout", Category: catTuning, Value: &duration{def.OpTimeout},
			Usage: "fail the job when a rank waits longer than this for another rank, in a collective or in the negotiation before it; the error names the rank that did not answer. A rank that submits nothing for this long while others wait counts too, and so does a tensor that some ranks submitted and others have not for this long (a stall: every rank fails naming the tensors and ranks), so keep it above the longest work one rank does alone (evaluation, checkpointing); 0 never [$GOROVOD_OP_TIMEOUT]"},
		&cli.BoolFlag{Name: "no-shared-memory", Category: catTuning,
			Usage: "keep links between ranks on one host on loopback TCP instead of shared memory [$GOROVOD_NO_SHARED_MEMORY]"},
		&cli.StringFlag{Name: "hierarchical-allreduce", Category: catTuning, Value: def.Hierarchical.String(),
			Usage: "all-reduce, all-gather and broadcast in two levels (inside each host, then one copy per host across the network): on, off, or auto (two levels past 32 KiB where every host has the same number of ranks, at least two; broadcast follows the hosts at any size) [$GOROVOD_HIERARCHICAL_ALLREDUCE]"},
		&cli.BoolFlag{Name: "autotune", Category: catTuning,
			Usage: "let rank 0 tune fusion, cycle time, the hierarchical switch and the cache while the job trains, keeping what moves the most bytes per second [$GOROVOD_AUTOTUNE]"},
		&cli.StringFlag{Name: "autotune-log", Category: catTuning, TakesFile: true,
			Usage: "write every autotuning trial to this CSV file [$GOROVOD_AUTOTUNE_LOG]"},
		&cli.BoolFlag{Name: "tls", Category: catTuning,
			Usage: "encrypt the rendezvous and every TCP link between ranks with TLS 1.3 keyed from the job secret (shared memory on one host stays as it is) [$GOROVOD_TLS]"},
	}
}

// knobFlags maps each GOROVOD_ variable of runner.KnobVars to the flag that
// sets its knob. Where the flag is not on the command line, the variable in
// gorun's own environment sets it (runner.Config.KnobsFromEnviron).
func knobFlags() map[string]string {
	return map[string]string{
		jobenv.EnvStartTimeout:      "start-timeout",
		jobenv.EnvFusionThreshold:   "fusion-threshold-mb",
		jobenv.EnvCycleTime:         "cycle-time-ms",
		jobenv.EnvCacheCapacity:     "cache-capacity",
		jobenv.EnvStallCheckTime:    "stall-check-time",
		jobenv.EnvStallShutdownTime: "stall-shutdown-time",
		jobenv.EnvTimeline:          "timeline-filename",
		jobenv.EnvLogLevel:          "log-level",
		jobenv.EnvOpTimeout:         "op-timeout",
		jobenv.EnvNoSharedMemory:    "no-shared-memory",
		jobenv.EnvHierarchical:      "hierarchical-allreduce",
		jobenv.EnvAutotune:          "autotune",
		jobenv.EnvAutotuneLog:       "autotune-log",
		jobenv.EnvTLS:               "tls",
	}
}

// maxSeconds is the longest duration in seconds.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// duration is a flag value that takes a Go duration ("90s", "1m30s") or a
// number of seconds ("90", "0.5").
type duration struct{ d time.Duration }

// Set parses s.
func (v *duration) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		v.d = d
		return nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.Abs(secs) > maxSeconds {
		return fmt.Errorf("want a duration such as 30s or 1m30s, or seconds")
	}
	v.d = time.Duration(secs * float64(time.Second))
	return nil
}

// String formats the value as a Go duration.
func (v *duration) String() string {
	if v == nil {
		return ""
	}
	return v.d.String()
}

// durationOf returns the value of the duration flag name.
func durationOf(c *cli.Context, name string) time.Duration {
	if v, ok := c.Generic(name).(*duration); ok {
		return v.d
	}
	return 0
}
