package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills gorun at once; its local
	// ranks die with it (parent-death signal).
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is gorun with its arguments (args[0] is the program name) and output
// streams; it returns the exit status and has printed any error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr, func(cfg runner.Config) error {
		return runner.Launch(ctx, cfg)
	})
	app.Metadata = map[string]any{rawArgsKey: args}
	err := app.Run(args)
	report(stderr, err)
	return exitCode(err)
}

// newApp builds the command line parser; launch runs the job.
func newApp(stdout, stderr io.Writer, launch func(runner.Config) error) *cli.App {
	return &cli.App{
		Name:      "gorun",
		Usage:     "run a gorovod job: one process per slot, wired together",
		UsageText: "gorun [flags] program [args...]\ngorun -np 4 -H host1:2,host2:2 ./train --epochs 3",
		Description: "Flags go before the program; everything from the program on is passed to it\n" +
			"as is. Put -- before a program whose name starts with '-'.\n\n" +
			"A config file (--config-file F: YAML, keys named like the flags) sets the flags\n" +
			"that it names and the command line does not. A tuning flag (or --start-timeout)\n" +
			"that neither sets takes the value of its GOROVOD_ variable (shown as [$NAME]) in\n" +
			"gorun's environment, in the ranks' syntax (Go durations; GOROVOD_FUSION_THRESHOLD\n" +
			"in bytes; GOROVOD_NO_SHARED_MEMORY, GOROVOD_AUTOTUNE and GOROVOD_TLS 1 or 0;\n" +
			"GOROVOD_HIERARCHICAL_ALLREDUCE auto, on or off), else its default: command\n" +
			"line, then config file, then environment, then default.\n\n" +
			"Exit status: 0 when every rank succeeded; the status of the first rank that\n" +
			"failed (1 if it has none); 2 for a mistake on the command line; 130 when\n" +
			"SIGINT or SIGTERM stopped the job.",
		Version:                   version(),
		Flags:                     flags(),
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // -H is split by runner.ParseHosts, -x by splitNames
		Writer:                    stdout,
		ErrWriter:                 stderr,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usagef("%v%s (see gorun --help)", err, suggestion(err, flags()))
		},
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the exit status
		Action: func(c *cli.Context) error {
			if done, err := inform(c, stdout); done {
				return err
			}
			if err := applyConfigFile(c); err != nil {
				return err
			}
			cfg, err := config(c, stdout, stderr)
			if err != nil {
				return err
			}
			return launch(cfg)
		},
	}
}

// inform runs the information flags (--check-build, --completion,
// --man): it prints what they ask for and reports done, or reports not
// done when none is given.
func inform(c *cli.Context, stdout io.Writer) (done bool, err error) {
	switch {
	case c.Bool("check-build"):
		return true, checkBuild(stdout)
	case c.IsSet("completion"):
		return true, completionScript(stdout, c.String("completion"), c.App)
	case c.Bool("man"):
		return true, manPage(stdout, c.App)
	}
	return false, nil
}

// version is the module version gorun was built from.
func version() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

// versionOf is the version gorun --version prints from the build
// information: the module version ("(devel)" for a build from a checkout),
// then the commit, its time and whether the tree had changes, as far as
// the build recorded them: "v0.2.0" from go install ...@v0.2.0,
// "(devel) (commit 0166099a1b2c, 2026-11-24T10:49:01Z, modified)" from go
// build in a checkout.
func versionOf(info *debug.BuildInfo) string {
	v := "(devel)"
	if info == nil {
		return v
	}
	if info.Main.Version != "" {
		v = info.Main.Version
	}
	var commit, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value[:min(len(s.Value), 12)]
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if commit == "" {
		return v
	}
	v += " (commit " + commit
	if at != "" {
		v += ", " + at
	}
	if modified {
		v += ", modified"
	}
	return v + ")"
}
