package jobenv

import "errors"

// Sentinel errors of package jobenv (besides ErrHostlist and
// ErrElasticProtocol, beside the code that returns them). Returned errors
// wrap them; test with errors.Is.
var (
	// ErrEnv reports a launcher–worker environment variable that cannot be
	// parsed, or an Env that breaks one of its invariants.
	ErrEnv = errors.New("jobenv: bad worker environment")
	// ErrLauncher reports a process whose launcher (Slurm, mpirun, torchrun,
	// a cluster spec) says it belongs to a job of several ranks that it
	// cannot join: a variable missing or malformed, no way to find rank 0,
	// or an unusable secret. The message names the launcher and the
	// variables it read.
	ErrLauncher = errors.New("jobenv: cannot join the launcher's job")
	// ErrPSJob reports, from Detect, an environment that makes this
	// process a task of a parameter-server job (see DetectTask), which
	// package ps runs: hvd.Init joins all-reduce jobs only.
	ErrPSJob = errors.New("jobenv: a task of a parameter-server job")
)

// maxQuoted bounds how much of a user's input an error message repeats.
const maxQuoted = 120

// clip shortens s to at most n bytes, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
