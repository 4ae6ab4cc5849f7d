package hvd

import (
	"fmt"
	"os"

	"github.com/gorovod/gorovod/jobenv"
)

// Role names this process's part in its job: in a parameter-server job
// (see jobenv.DetectTask) "chief", "worker", "ps" or "evaluator"
// (jobenv.RoleChief, RoleWorker, RolePS, RoleEvaluator); in an all-reduce
// job "chief" for rank 0 and "worker" for the others, so that a program
// can save checkpoints where Role is "chief" under either strategy; a
// process alone is the chief. After Init it answers from the running
// runtime's rank; before, from the environment, and an environment that
// cannot be read (a malformed launcher or PS job) is an error.
func Role() (string, error) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultRT != nil {
		return rankRole(defaultRT.Rank()), nil
	}
	getenv := os.Getenv
	if _, ok := os.LookupEnv(jobenv.EnvSecret); !ok && kept.value != "" {
		getenv = withSecret(kept.value) // Init took it out of the environment
	}
	return roleFrom(getenv)
}

// roleFrom is Role read from the environment through getenv.
func roleFrom(getenv func(string) string) (string, error) {
	task, ok, err := jobenv.DetectTask(getenv)
	switch {
	case err != nil:
		return "", fmt.Errorf("hvd: reading the launcher's environment: %w", err)
	case ok:
		return task.Role, nil
	}
	env, _, err := jobenv.Detect(getenv)
	if err != nil {
		return "", fmt.Errorf("hvd: reading the launcher's environment: %w", err)
	}
	return rankRole(env.Rank), nil
}

// rankRole is the role of an all-reduce rank.
func rankRole(rank int) string {
	if rank == 0 {
		return jobenv.RoleChief
	}
	return jobenv.RoleWorker
}
