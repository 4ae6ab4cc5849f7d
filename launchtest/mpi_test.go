package launchtest

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// ompiEnv lets Open MPI run as root, as CI does.
var ompiEnv = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}

// ompiTestEnv is ompiEnv with Open MPI's session directories in a
// directory of the test's own rather than under /tmp/ompi.HOST.UID, where
// other jobs' may be.
func ompiTestEnv(t *testing.T) []string {
	return append(slices.Clone(ompiEnv), "TMPDIR="+t.TempDir())
}

// TestMpirun: Open MPI's mpirun and MPICH's mpiexec start 4 ranks on one
// host; each rank reads its launcher's variables, rank 0 serves the
// rendezvous, and the job is one job of 4 (not 4 jobs of 1).
func TestMpirun(t *testing.T) {
	launchers := []struct {
		name, program string
		argv          []string
		env           []string
	}{
		{"openmpi", "mpirun.openmpi", []string{"mpirun.openmpi", "--oversubscribe", "--bind-to", "none", "-np", "4"}, ompiTestEnv(t)},
		{"mpich", "mpiexec.mpich", []string{"mpiexec.mpich", "-np", "4"}, nil},
	}
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			need(t, l.program)
			ctx := context.Background()
			r := run(t, command(ctx, l.env, append(l.argv, bin(t, "hello"))...))
			mustSucceed(t, "hello", r)
			if strings.Count(r.stdout, "size=4 sum=10") != 1 || strings.Contains(r.stdout, "size=1") {
				t.Errorf("stdout %q: want one job of 4 ranks printing size=4 sum=10 once", r.stdout)
			}
			if !strings.Contains(r.stderr, "launcher="+l.name) {
				t.Errorf("rank 0 did not log its launcher %s:\n%s", l.name, r.stderr)
			}
			r = run(t, command(ctx, l.env, append(append(l.argv, bin(t, "allreduce_bench")), benchArgs...)...))
			mustSucceed(t, "allreduce_bench", r)
			if !strings.Contains(r.stdout, "4 ranks") {
				t.Errorf("allreduce_bench did not run on 4 ranks:\n%s", r.stdout)
			}
			benchWrong(t, r.stdout)
		})
	}
}
