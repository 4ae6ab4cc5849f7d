package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/runner"
	"github.com/gorovod/gorovod/settings"
)

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// rawArgsKey is the App.Metadata key of the command line as given, which
// flagsAfterProgram reads.
const rawArgsKey = "args"

// flagsAfterProgram warns, on stderr, about gorun flags written after the
// program ("gorun ./hello -np 2"): they go to the program, as everything
// after it does. After "--" (gorun -- ./hello -np 2) the user said so, and
// nothing is said.
func flagsAfterProgram(c *cli.Context, stderr io.Writer) {
	raw, _ := c.App.Metadata[rawArgsKey].([]string)
	prog := c.Args().Slice()
	at := len(raw) - len(prog) // the program's index: the positional arguments are the command line's tail
	if at < 1 || at > len(raw) || raw[at-1] == "--" {
		return
	}
	names := map[string]bool{}
	for _, f := range c.App.Flags {
		for _, n := range f.Names() {
			names[n] = true
		}
	}
	var ours []string
	for _, a := range prog[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && names[name] {
			ours = append(ours, a)
		}
	}
	if len(ours) > 0 {
		fmt.Fprintf(stderr, "gorun: note: %s after the program %s %s to the program, not to gorun; gorun's flags go before the program (write -- before it to pass them on without this note)\n",
			strings.Join(ours, " "), prog[0], map[bool]string{true: "goes", false: "go"}[len(ours) == 1])
	}
}

// boolValueAsProgram refuses a program named true or false when a boolean
// flag is set: "--verbose false" gives --verbose no value (boolean flags
// take none) and would run false(1) as the program.
func boolValueAsProgram(c *cli.Context, program string) error {
	if program != "true" && program != "false" {
		return nil
	}
	for _, f := range c.App.Flags {
		if b, ok := f.(*cli.BoolFlag); ok && c.IsSet(b.Name) {
			return usagef("the program would be %q: boolean flags such as --%s take no separate value; write --%s=%s (or name the program by its path, ./%s)",
				program, b.Name, b.Name, program, program)
		}
	}
	return nil
}

// config turns the parsed command line into a runner.Config.
func config(c *cli.Context, stdout, stderr io.Writer) (runner.Config, error) {
	cfg := runner.DefaultConfig()
	cfg.Command = c.Args().Slice()
	if len(cfg.Command) == 0 {
		return cfg, usagef("no program to run (usage: gorun [flags] program [args...]; see gorun --help)")
	}
	if err := boolValueAsProgram(c, cfg.Command[0]); err != nil {
		return cfg, err
	}
	flagsAfterProgram(c, stderr)
	hosts, err := hostsOf(c)
	if err != nil {
		return cfg, err
	}
	if cfg.Launcher, err = launcherOf(c); err != nil {
		return cfg, err
	}
	if hosts == nil && cfg.Launcher != runner.SpawnLocal && c.String("host-discovery-script") == "" {
		if hosts, err = allocationHosts(&cfg); err != nil {
			return cfg, err
		}
	}
	cfg.Hosts = hosts
	cfg.PS, cfg.Evaluator = c.Int("ps"), c.Bool("evaluator")
	if c.IsSet("ps") && cfg.PS == 0 {
		// 0 is the flag's unset value (an all-reduce job); written out, it
		// asks for a parameter-server job without servers.
		return cfg, usagef("--ps 0: a parameter-server job needs at least 1 server (leave --ps out for an all-reduce job)")
	}
	if c.IsSet("evaluator-timeout") {
		cfg.EvaluatorTimeout = c.Generic("evaluator-timeout").(*duration).d
	}
	switch {
	case c.IsSet("np"):
		cfg.NP = c.Int("np")
	case len(hosts) > 0:
		cfg.NP = runner.TotalSlots(hosts) - max(cfg.PS, 0) // the slots the servers leave to workers
	default:
		return cfg, usagef("-np is required when neither -H nor -hostfile is given")
	}
	cfg.ForwardEnv = splitNames(c.StringSlice("x"))
	cfg.MinNP, cfg.ResetLimit, cfg.MaxNP = c.Int("min-np"), c.Int("reset-limit"), c.Int("max-np")
	cfg.DiscoveryScript, cfg.SlotsPerHost = c.String("host-discovery-script"), c.Int("slots-per-host")
	cfg.ElasticTimeout = c.Generic("elastic-timeout").(*duration).d
	cfg.BindAddr, cfg.NetworkInterface = c.String("bind-addr"), c.String("network-interface")
	cfg.SSHPort, cfg.SSHIdentityFile = c.Int("ssh-port"), c.String("ssh-identity-file")
	cfg.OutputDir, cfg.Verbose = c.String("output-filename"), c.Bool("verbose")
	cfg.TimestampOutput = c.Bool("prefix-output-with-timestamp")
	cfg.MetricsDir = c.String("metrics-dir")
	cfg.Dashboard = c.String("dashboard")
	cfg.DashboardLinger = c.Generic("dashboard-linger").(*duration).d
	switch cfg.BindTo = c.String("bind-to"); cfg.BindTo {
	case runner.BindCore, runner.BindNone:
	default:
		return cfg, usagef("--bind-to %q: want core or none", cfg.BindTo)
	}
	if cfg.OutputRanks, err = ranksOf(c.String("output-ranks")); err != nil {
		return cfg, err
	}
	cfg.Stdout, cfg.Stderr = stdout, stderr
	if cfg.Knobs, err = knobsOf(c); err != nil {
		return cfg, err
	}
	flagOf := knobFlags()
	err = cfg.KnobsFromEnviron(os.Getenv, func(name string) bool { return c.IsSet(flagOf[name]) })
	return cfg, err
}

// ranksOf parses --output-ranks: ranks separated by commas; "" gives nil
// (every rank).
func ranksOf(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ranks []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 0 {
			return nil, usagef("--output-ranks %q: want ranks (non-negative integers) separated by commas, as 0 or 0,3", s)
		}
		ranks = append(ranks, r)
	}
	return ranks, nil
}

// hostsOf reads -H or -hostfile (at most one of them); nil when neither.
func hostsOf(c *cli.Context) ([]runner.Host, error) {
	list, file := c.StringSlice("hosts"), c.String("hostfile")
	switch {
	case len(list) > 0 && file != "":
		return nil, usagef("-H and -hostfile are mutually exclusive")
	case len(list) > 0:
		return runner.ParseHosts(strings.Join(list, ","))
	case file != "":
		return runner.ReadHostfile(file)
	}
	return nil, nil
}

// launcherOf reads --launcher: auto (""), local, ssh or srun.
func launcherOf(c *cli.Context) (string, error) {
	switch l := c.String("launcher"); l {
	case "auto", "":
		return runner.SpawnAuto, nil
	case runner.SpawnLocal, runner.SpawnSSH, runner.SpawnSrun:
		return l, nil
	default:
		return "", usagef("--launcher %q: want auto, local, ssh or srun", l)
	}
}

// allocationHosts returns, when gorun runs inside a Slurm allocation and no
// hosts were given, the allocation's nodes and slots, and makes srun the
// launcher unless another was asked for. --launcher srun outside an
// allocation is an error.
func allocationHosts(cfg *runner.Config) ([]runner.Host, error) {
	hosts, ok, err := runner.SlurmAllocation(os.Getenv)
	switch {
	case err != nil:
		return nil, err
	case !ok && cfg.Launcher == runner.SpawnSrun:
		return nil, usagef("--launcher srun needs a Slurm allocation (run gorun inside salloc or sbatch; SLURM_JOB_ID is not set)")
	case !ok:
		return nil, nil
	}
	if cfg.Launcher == runner.SpawnAuto {
		cfg.Launcher = runner.SpawnSrun
	}
	return hosts, nil
}

// splitNames splits "-x A,B" into A and B; an entry holding '=' (a value)
// is kept whole.
func splitNames(entries []string) []string {
	var out []string
	for _, e := range entries {
		if strings.Contains(e, "=") {
			out = append(out, e)
		} else {
			out = append(out, strings.Split(e, ",")...)
		}
	}
	return out
}

// knobsOf returns the knobs that the flags of settings.Table set (their
// defaults where none is given), and a usage error for each flag whose
// value is out of range.
func knobsOf(c *cli.Context) (settings.Knobs, error) {
	var knobs settings.Knobs
	var errs []error
	for _, k := range settings.Table() {
		v, ok := c.Generic(k.Flag).(*knobValue)
		if !ok {
			continue
		}
		knobs = *v.knobs
		if ch, ok := v.Value.(settings.Checker); ok {
			if err := ch.Check(); err != nil {
				errs = append(errs, usagef("--%s %v", k.Flag, err))
			}
		}
	}
	return knobs, errors.Join(errs...)
}
