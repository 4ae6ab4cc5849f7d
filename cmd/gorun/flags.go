package main

import (
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/runner"
	"github.com/gorovod/gorovod/settings"
)

// Flag categories; the help lists them in alphabetical order. The knobs'
// flags (settings.Table) are in settings.CategoryTuning, or in job.
const (
	catJob    = settings.CategoryJob
	catHosts  = "hosts"
	catOutput = "output"
	catInfo   = "information (print and exit)"
)

// flags returns gorun's flags. Values are new on every call, so that each
// run of the app starts from the defaults.
func flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "np", Aliases: []string{"n", "num-proc"}, Category: catJob, Usage: "number of ranks to start (-n and --num-proc, as mpirun and horovodrun spell it, work too)",
			DefaultText: "all the slots of -H or -hostfile"},
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
		&cli.IntFlag{Name: "ps", Category: catJob,
			Usage:       "make it a parameter-server job of N servers: -np workers, N servers and a chief, 1+np+N ranks of the program with GOROVOD_PS_SERVERS=N (rank 0 the chief, the last N the servers; the program runs ps.Run); servers spread across the hosts first, workers fill the other slots, the chief runs on the first host without a slot; a worker that fails is logged and the job goes on, a server that ends before the chief or a chief that fails stops it; after the chief exits 0 the others have the stop grace period (3s, as between SIGTERM and SIGKILL) to exit",
			DefaultText: "all-reduce job"},
		&cli.BoolFlag{Name: "evaluator", Category: catJob,
			Usage: "with --ps, start the program once more on the first host, without a slot or a rank, with GOROVOD_ROLE=evaluator (it runs evaluator.Run); its output is prefixed [evaluator]"},
		&cli.GenericFlag{Name: "evaluator-timeout", Category: catJob, Value: &duration{runner.DefaultEvaluatorTimeout},
			Usage: "how long the evaluator may run on after the chief has ended before it gets SIGTERM; it must then exit 0 (Go duration, or seconds)"},

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
		&cli.StringFlag{Name: "metrics-dir", Category: catOutput, TakesFile: true,
			Usage: "write DIR/metrics.jsonl: every scalar the ranks publish with hvd.LogScalars, their runtime series (hvd/step_seconds, hvd/allreduce_bytes, ...) and the job's events, one JSON object a line, 1 GiB at most; and DIR/summary.svg, their plots, when the job is over"},
		&cli.StringFlag{Name: "dashboard", Category: catOutput,
			Usage: "serve a live web dashboard of the job, its /metrics for Prometheus and its JSON on ADDR (host:port; an empty host means 127.0.0.1); off loopback, gorun prints a URL with the token every request needs"},
		&cli.GenericFlag{Name: "dashboard-linger", Category: catOutput, Value: &duration{},
			Usage: "keep serving --dashboard this long after the job ended before gorun exits (Ctrl-C ends it sooner); the exit status stays the job's", DefaultText: "0s"},
		&cli.BoolFlag{Name: "prefix-output-with-timestamp", Category: catOutput, Usage: "put the time (UTC, milliseconds) before every line of the ranks' output on the terminal"},
		&cli.BoolFlag{Name: "verbose", Category: catOutput, Usage: "log the rank placement and the commands run, at info level (write --verbose=false to unset)"},

		&cli.BoolFlag{Name: "check-build", Category: catInfo,
			Usage: "print what this build of gorun supports (transports, shared memory, CUDA, kernels, launchers) and exit"},
		&cli.StringFlag{Name: "completion", Category: catInfo,
			Usage: "print a completion script for this shell (bash or zsh) and exit: source <(gorun --completion bash)"},
		&cli.BoolFlag{Name: "man", Category: catInfo, Usage: "print gorun's manual page (roff) and exit: gorun --man | man -l -"},
	}, knobFlagList()...)
}

// knobFlagList returns the flags of settings.Table, which set the knobs of
// one settings.Knobs (read back by knobsOf). Each names its GOROVOD_
// variable in its help.
func knobFlagList() []cli.Flag {
	knobs := settings.Defaults()
	var out []cli.Flag
	for _, k := range settings.Table() {
		usage := k.Usage + " [$" + k.Var + k.VarNote + "]"
		if k.Kind == settings.KindBool {
			out = append(out, &cli.BoolFlag{Name: k.Flag, Aliases: k.Aliases, Category: k.HelpCategory(), Usage: usage,
				Value: *k.Bool(&knobs), Destination: k.Bool(&knobs)})
			continue
		}
		f := &cli.GenericFlag{Name: k.Flag, Aliases: k.Aliases, Category: k.HelpCategory(), Usage: usage,
			TakesFile: k.TakesFile, Value: &knobValue{Value: k.FlagText(&knobs), knobs: &knobs}}
		if v := f.Value.String(); k.Kind == settings.KindText && v != "" {
			f.DefaultText = strconv.Quote(v)
		}
		out = append(out, f)
	}
	return out
}

// knobValue is the value of a knob's flag: the knob in the Knobs that all
// knob flags of one command line share.
type knobValue struct {
	settings.Value
	knobs *settings.Knobs
}

// knobFlags maps each GOROVOD_ variable of runner.KnobVars to the flag that
// sets its knob. Where the flag is not on the command line, the variable in
// gorun's own environment sets it (runner.Config.KnobsFromEnviron).
func knobFlags() map[string]string {
	m := map[string]string{}
	for _, k := range settings.Table() {
		m[k.Var] = k.Flag
	}
	return m
}

// duration is a flag value that takes a Go duration ("90s", "1m30s") or a
// number of seconds ("90", "0.5").
type duration struct{ d time.Duration }

// Set parses s.
func (v *duration) Set(s string) error {
	d, err := settings.ParseSeconds(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

// String formats the value as a Go duration.
func (v *duration) String() string {
	if v == nil {
		return ""
	}
	return v.d.String()
}
