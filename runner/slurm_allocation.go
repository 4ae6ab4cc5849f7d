package runner

import "github.com/gorovod/gorovod/jobenv"

// SlurmAllocation returns the hosts of the Slurm allocation that this
// process runs in (salloc, sbatch), read through getenv: the nodes of
// SLURM_JOB_NODELIST, each with the tasks SLURM_TASKS_PER_NODE gives it
// (set when the allocation asked for tasks, -n) or else its CPUs
// (SLURM_JOB_CPUS_PER_NODE). ok is false outside an allocation
// (SLURM_JOB_ID unset); a malformed variable is an error wrapping
// jobenv.ErrLauncher.
func SlurmAllocation(getenv func(string) string) (hosts []Host, ok bool, err error) {
	nodes, slots, ok, err := jobenv.SlurmNodes(getenv)
	if !ok || err != nil {
		return nil, ok, err
	}
	for i, n := range nodes {
		hosts = append(hosts, Host{Name: n, Slots: slots[i]})
	}
	return hosts, true, nil
}
