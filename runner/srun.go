package runner

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Launcher choices of Config.Launcher (gorun --launcher).
const (
	SpawnAuto  = ""      // local ranks locally, others over ssh; srun inside a Slurm allocation with no hosts given
	SpawnLocal = "local" // every rank on this machine
	SpawnSSH   = "ssh"   // every rank over ssh, this machine's too
	SpawnSrun  = "srun"  // every rank as a one-task step of the Slurm allocation
)

// SrunSpawner starts each rank as a one-task step of the Slurm allocation
// that gorun runs in (salloc, sbatch), on the slot's node: no ssh between
// nodes is needed. The rank's environment, the job secret included,
// travels in srun's environment (--export=ALL), which Slurm carries to
// the node over its own munge-signed (not encrypted) connection; it never
// appears on a command line. Steps overlap (--overlap), so ranks share the
// allocation's CPUs, and are not bound to one CPU (--cpu-bind=none):
// Command.CPUs applies on the node instead, through a shell prelude that
// sees the step's processors (see CPUShare).
type SrunSpawner struct {
	// Srun is the srun program; "" means "srun" on PATH.
	Srun string
	// ExtraArgs go to srun before the rank's command.
	ExtraArgs []string
}

// Spawn starts c for slot s through srun; see Spawner.
func (sp SrunSpawner) Spawn(ctx context.Context, s Slot, c Command, stdout, stderr io.Writer) (Process, error) {
	srun := sp.Srun
	if srun == "" {
		srun = "srun"
	}
	argv := []string{srun, "--nodes=1", "--ntasks=1", "--nodelist=" + s.Host, "--overlap", "--cpu-bind=none",
		"--kill-on-bad-exit=1", "--export=ALL", "--job-name=gorun-rank" + fmt.Sprint(s.Rank)}
	if c.Dir != "" {
		argv = append(argv, "--chdir="+c.Dir)
	}
	argv = append(append(argv, sp.ExtraArgs...), "--")
	// The CPU share applies on the node (cpuPrelude), not to srun here.
	p, err := LocalSpawner{}.Spawn(ctx, s, Command{Argv: append(argv, withCPUPrelude(c.CPUs, c.Argv)...), Env: c.Env, Dir: c.Dir}, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return srunProcess{p.(*localProcess)}, nil
}

// srunProcess is a rank started by SrunSpawner: the local srun process.
// Signal reaches srun alone, which forwards it to the rank; on SIGTERM srun
// cancels the step, and Slurm kills what is left of it after its KillWait.
// Kill (SIGKILL to srun's process group, as for a local rank) ends srun.
type srunProcess struct{ *localProcess }

// Signal sends sig to srun alone (not its process group), which forwards
// it to the rank.
func (p srunProcess) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }
