package runner

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Command is what one rank runs: the program and its arguments, the
// variables to set on top of the inherited environment, and the working
// directory. Env holds the GOROVOD_* contract, secret included; a spawner
// that crosses a machine boundary must not put the secret on a command line.
type Command struct {
	Argv []string
	Env  []string // "NAME=value" entries added for this rank
	Dir  string
	CPUs CPUShare // the rank's share of its host's processors: thread defaults and binding
}

// Spawner starts one rank. The local spawner runs it with os/exec; the ssh
// spawner on a remote host; tests use a fake.
type Spawner interface {
	// Spawn starts the rank of slot s. Its standard output and error are
	// copied, whole lines at a time, to stdout and stderr until it exits.
	// An error names the rank and its host ("runner: rank 3 on node2: ...");
	// Launch reports it as it is.
	Spawn(ctx context.Context, s Slot, c Command, stdout, stderr io.Writer) (Process, error)
}

// Process is a started rank.
type Process interface {
	// Wait blocks until the rank has exited and its output is drained. The
	// error is nil for exit status 0; otherwise an *ExitError or a
	// start/transport failure.
	Wait() error
	// Signal delivers sig to the rank (and its process group where the
	// platform allows); used for the graceful stop (SIGTERM).
	Signal(sig os.Signal) error
	// Kill stops the rank at once (SIGKILL).
	Kill() error
}

// ExitError reports a rank that exited unsuccessfully.
type ExitError struct {
	Rank   int
	Host   string
	Status int    // exit status, or -1 when killed by a signal
	Signal string // the signal's name when killed by one
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("runner: rank %d on %s was killed by %s", e.Rank, e.Host, e.Signal)
	}
	return fmt.Sprintf("runner: rank %d on %s exited with status %d", e.Rank, e.Host, e.Status)
}
