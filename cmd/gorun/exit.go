package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner"
)

// Exit statuses of gorun, besides a failed rank's own status.
const (
	exitOK          = 0
	exitFailure     = 1   // a rank failed without a usable status, or gorun itself failed
	exitUsage       = 2   // bad flags, host list, hostfile or configuration
	exitInterrupted = 130 // SIGINT or SIGTERM stopped the job
)

// exitCode maps Launch's (or the parser's) error to gorun's exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if isUsage(err) {
		return exitUsage
	}
	if errors.Is(err, runner.ErrInterrupted) {
		return exitInterrupted
	}
	if ee, ok := errors.AsType[*runner.ExitError](err); ok && ee.Status > 0 && ee.Status < 256 {
		return ee.Status
	}
	return exitFailure
}

// isUsage reports whether err is the user's mistake on the command line.
func isUsage(err error) bool {
	if _, ok := errors.AsType[usageError](err); ok {
		return true
	}
	for _, target := range []error{runner.ErrConfig, runner.ErrHosts, runner.ErrHostfile,
		runner.ErrNoHosts, runner.ErrNumProc, runner.ErrSlots, jobenv.ErrEnv} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// report prints err to w, one "gorun: " line per problem, in place of the
// prefix of the launcher's packages (runner, jobenv).
func report(w io.Writer, err error) {
	if err == nil {
		return
	}
	for line := range strings.Lines(err.Error()) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "runner: "); ok {
			line = rest
		} else {
			line = strings.TrimPrefix(line, "jobenv: ")
		}
		fmt.Fprintln(w, "gorun: "+line)
	}
}
