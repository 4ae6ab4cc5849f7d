package launchtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJoinErrors: a process that a launcher's variables place in a job of
// several ranks, but that cannot join it, exits non-zero with one line
// that names the launcher and what to fix; never a job of one rank.
func TestJoinErrors(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open-secret")
	if err := os.WriteFile(open, []byte(strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	step := []string{"SLURM_JOB_ID=41", "SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_LOCALID=0",
		"SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=1(x2)"}
	torch := []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"srun forgotten in a batch script", []string{"SLURM_JOB_ID=41", "SLURM_NTASKS=4", "SLURM_JOB_NODELIST=n[1-2]"},
			[]string{"slurm", "SLURM_NTASKS=4", "srun"}},
		{"WORLD_SIZE without RANK", []string{"WORLD_SIZE=3"}, []string{"torchrun", "WORLD_SIZE=3"}},
		{"bad node list", append(step, "SLURM_STEP_NODELIST=n[1-"), []string{"slurm", "SLURM_STEP_NODELIST", "n[1-"}},
		{"mpirun across hosts without a rendezvous address", []string{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
			"OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}, []string{"openmpi", "GOROVOD_RENDEZVOUS_ADDR", "-x"}},
		{"world-readable secret file", append(torch, "GOROVOD_SECRET_FILE="+open), []string{"GOROVOD_SECRET_FILE", "mode 0644", "chmod 600"}},
		{"missing secret file", append(torch, "GOROVOD_SECRET_FILE="+filepath.Join(dir, "none")), []string{"GOROVOD_SECRET_FILE", "no such file"}},
		{"rendezvous address without a launcher", []string{"GOROVOD_RENDEZVOUS_ADDR=127.0.0.1:9"}, []string{"GOROVOD_RENDEZVOUS_ADDR", "no launcher"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, command(context.Background(), tt.env, bin(t, "hello")))
			checkOneLineError(t, r, tt.want...)
		})
	}
}

// TestMissingRankNamed: a job whose rank 1 never starts fails after the
// start timeout, and rank 0 names the missing rank.
func TestMissingRankNamed(t *testing.T) {
	env := []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + freePort(t), "GOROVOD_START_TIMEOUT=1s"}
	r := run(t, command(context.Background(), env, bin(t, "hello")))
	checkOneLineError(t, r, "rank 1", "never registered", "within 1s", "torchrun")
}

// checkOneLineError checks that r failed with one line on standard error
// (rank 0's launcher log aside) holding every one of want.
func checkOneLineError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("exit status 0, stdout %q, stderr %q", r.stdout, r.stderr)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.Contains(l, " INFO ") && !strings.Contains(l, " WARN ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one error line, stderr:\n%s", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("%q does not mention %q", lines[0], w)
		}
	}
	if strings.Contains(r.stdout, "size=") {
		t.Errorf("the program ran anyway: %q", r.stdout)
	}
	t.Log(lines[0])
}
