package jobenv

import (
	"fmt"
	"strings"
)

// Variables of a Slurm job step that the Slurm reader and gorun's srun
// launcher read.
const (
	slurmProcID        = "SLURM_PROCID"
	slurmStepTasks     = "SLURM_STEP_NUM_TASKS"
	slurmNTasks        = "SLURM_NTASKS"
	slurmLocalID       = "SLURM_LOCALID"
	slurmNodeID        = "SLURM_NODEID"
	slurmStepNodes     = "SLURM_STEP_NODELIST"
	slurmJobNodes      = "SLURM_JOB_NODELIST"
	slurmStepPerNode   = "SLURM_STEP_TASKS_PER_NODE"
	slurmTasksPerNode  = "SLURM_TASKS_PER_NODE"
	slurmNodeName      = "SLURMD_NODENAME"
	slurmJobID         = "SLURM_JOB_ID"
	slurmStepID        = "SLURM_STEP_ID"
	slurmDistribution  = "SLURM_DISTRIBUTION"
	slurmJobCPUPerNode = "SLURM_JOB_CPUS_PER_NODE"
)

// slurmReader reads a task of a Slurm job step (srun). Rank 0, on the first
// node of the step, serves the rendezvous on a port derived from the job
// and step ids.
func slurmReader() launcherReader {
	return launcherReader{
		name: LauncherSlurm,
		vars: []string{slurmProcID, slurmStepTasks, slurmNTasks, slurmLocalID, slurmNodeID, slurmStepNodes,
			slurmJobNodes, slurmStepPerNode, slurmTasksPerNode, slurmNodeName, slurmJobID, slurmStepID, slurmDistribution},
		sizeVar: slurmNTasks,
		hint:    "start each rank with srun, or gorun inside the allocation",
		match:   func(d detector) bool { return d.getenv(slurmProcID) != "" && d.getenv(slurmStepID) != "" },
		read:    readSlurm,
	}
}

// first returns the value of the first of names that is set, and its name.
func (d detector) first(names ...string) (value, name string) {
	for _, n := range names {
		if v := d.getenv(n); v != "" {
			return v, n
		}
	}
	return "", names[0]
}

// readSlurm places a Slurm task from its step's node list and tasks per node.
func readSlurm(d detector) (placement, error) {
	sizeVar := slurmStepTasks
	if d.getenv(sizeVar) == "" {
		sizeVar = slurmNTasks
	}
	v, err := d.intVars(slurmProcID, sizeVar, slurmLocalID, slurmNodeID)
	if err != nil {
		return placement{}, err
	}
	rank, size, localRank, nodeID := v[0], v[1], v[2], v[3]
	nodes, perNode, err := d.slurmLayout()
	if err != nil {
		return placement{}, err
	}
	if err := checkSlurmLayout(nodes, perNode, size, nodeID, localRank); err != nil {
		return placement{}, err
	}
	p := placement{rank: rank, size: size, localRank: localRank, localSize: perNode[nodeID],
		host: nodes[nodeID], rdvHost: nodes[0], nodes: nodes,
		jobID: "slurm-" + d.getenv(slurmJobID) + "." + d.getenv(slurmStepID)}
	if name := d.getenv(slurmNodeName); name != "" {
		p.host = name
	}
	p.crossRank, p.crossSize = crossOf(perNode, nodeID, localRank)
	if dist := d.getenv(slurmDistribution); dist == "" || strings.HasPrefix(dist, "block") {
		p.hosts = blockHosts(nodes, perNode)
	}
	if rank == 0 && nodeID != 0 {
		return placement{}, fmt.Errorf("rank 0 runs on %s, not on the step's first node %s: set %s=%s:PORT for every rank", p.host, nodes[0], EnvRendezvousAddr, p.host)
	}
	return p, checkRanks(p)
}

// slurmLayout reads the step's nodes and how many tasks each runs.
func (d detector) slurmLayout() (nodes []string, perNode []int, err error) {
	list, listVar := d.first(slurmStepNodes, slurmJobNodes)
	if list == "" {
		return nil, nil, fmt.Errorf("%s is not set", listVar)
	}
	if nodes, err = ExpandHostlist(list); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", listVar, err)
	}
	counts, countsVar := d.first(slurmStepPerNode, slurmTasksPerNode)
	if counts == "" {
		return nil, nil, fmt.Errorf("%s is not set", countsVar)
	}
	if perNode, err = ExpandTasksPerNode(counts); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", countsVar, err)
	}
	return nodes, perNode, nil
}

// checkSlurmLayout checks that the node list and task counts describe the
// same step as the task's numbers.
func checkSlurmLayout(nodes []string, perNode []int, size, nodeID, localRank int) error {
	total := 0
	for _, n := range perNode {
		total += n
	}
	switch {
	case len(nodes) != len(perNode):
		return fmt.Errorf("the node list has %d nodes but the tasks per node list %d", len(nodes), len(perNode))
	case total != size:
		return fmt.Errorf("the tasks per node add up to %d, not to the %d tasks of the step", total, size)
	case nodeID >= len(nodes):
		return fmt.Errorf("node %d is not in a step of %d nodes", nodeID, len(nodes))
	case localRank >= perNode[nodeID]:
		return fmt.Errorf("local task %d does not fit the %d tasks of node %d", localRank, perNode[nodeID], nodeID)
	}
	return nil
}

// crossOf returns the position of node among the nodes that run a task with
// local rank lr, and their number.
func crossOf(perNode []int, node, lr int) (rank, size int) {
	for i, n := range perNode {
		if n > lr {
			if i < node {
				rank++
			}
			size++
		}
	}
	return rank, size
}

// blockHosts lists the host of each rank when ranks fill nodes in order.
func blockHosts(nodes []string, perNode []int) []string {
	var hosts []string
	for i, n := range perNode {
		for range n {
			hosts = append(hosts, nodes[i])
		}
	}
	return hosts
}

// SlurmNodes returns the nodes of the Slurm allocation that this process
// runs in (salloc, sbatch), read through getenv: the nodes of
// SLURM_JOB_NODELIST, each with the tasks SLURM_TASKS_PER_NODE gives it
// (set when the allocation asked for tasks, -n) or else its CPUs
// (SLURM_JOB_CPUS_PER_NODE), in slots. ok is false outside an allocation
// (SLURM_JOB_ID unset); a malformed variable is an error wrapping
// ErrLauncher. gorun's srun launcher takes its hosts from it
// (runner.SlurmAllocation).
func SlurmNodes(getenv func(string) string) (nodes []string, slots []int, ok bool, err error) {
	if getenv(slurmJobID) == "" {
		return nil, nil, false, nil
	}
	d := detector{getenv: getenv}
	fail := func(err error) ([]string, []int, bool, error) {
		return nil, nil, true, fmt.Errorf("%w: the Slurm allocation (%s): %w", ErrLauncher,
			strings.Join(d.setVars([]string{slurmJobID, slurmJobNodes, slurmTasksPerNode, slurmJobCPUPerNode}), " "), err)
	}
	list := getenv(slurmJobNodes)
	if list == "" {
		return fail(fmt.Errorf("%s is not set", slurmJobNodes))
	}
	nodes, err = ExpandHostlist(list)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", slurmJobNodes, err))
	}
	counts, countsVar := d.first(slurmTasksPerNode, slurmJobCPUPerNode)
	if counts == "" {
		return fail(fmt.Errorf("neither %s nor %s is set", slurmTasksPerNode, slurmJobCPUPerNode))
	}
	perNode, err := ExpandTasksPerNode(counts)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", countsVar, err))
	}
	if len(perNode) != len(nodes) {
		return fail(fmt.Errorf("%d nodes but %d counts in %s", len(nodes), len(perNode), countsVar))
	}
	return nodes, perNode, true, nil
}
