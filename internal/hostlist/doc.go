// Package hostlist is the host-list syntax that gorun's -H and hostfile,
// host discovery, Slurm allocations and a GOROVOD_CLUSTER spec share: one
// Host per machine with its slot count, and the rules for host names.
// Package runner exports it (runner.Host, runner.ParseHosts); package jobenv
// reads cluster specs and Slurm node lists with it.
package hostlist
