package testenv

import "os"

// The CI switches. Set to 1, each turns a missing prerequisite of its
// tests into a failure instead of a skip.
const (
	// RequireSSHD: OpenSSH's sshd for the ssh launcher's tests
	// (runner/internal/testsshd).
	RequireSSHD = "GOROVOD_REQUIRE_SSHD"
	// RequireSlurm: Slurm, munge, root and network namespaces for the
	// throwaway Slurm cluster (internal/testslurm).
	RequireSlurm = "GOROVOD_REQUIRE_SLURM"
	// RequireCluster: the launchers and emulated hosts of the end-to-end
	// launch tests (launchtest: mpirun, mpiexec, Slurm, manual starts).
	RequireCluster = "GOROVOD_REQUIRE_CLUSTER"
	// RequireTools: zsh and groff, which check gorun's completion script
	// and manual page (cmd/gorun), Chromium, which loads the dashboard's
	// page (internal/testutil/browser, for internal/dashboard and
	// launchtest's TestDashboard), and a python3 with torch, which runs
	// examples/mnist's PyTorch DDP peer (examples/mnist/peers).
	RequireTools = "GOROVOD_REQUIRE_TOOLS"
)

// Required reports whether the switch named name is on: set to anything
// but "" or "0".
func Required(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}
