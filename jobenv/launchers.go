package jobenv

import (
	"fmt"
	"strconv"
)

// This file holds the readers of the MPI and torchrun-style launchers; the
// Slurm and cluster-spec readers have files of their own.

// loopback is where rank 0 serves the rendezvous of a job on one host.
const loopback = "127.0.0.1"

// openMPIReader reads Open MPI's mpirun: OMPI_COMM_WORLD_*. mpirun names no
// host for rank 0, so a job across hosts needs GOROVOD_RENDEZVOUS_ADDR.
func openMPIReader() launcherReader {
	const rank, size = "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"
	const localRank, localSize = "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"
	const jobID = "OMPI_MCA_ess_base_jobid"
	return launcherReader{
		name:    LauncherOpenMPI,
		vars:    []string{rank, size, localRank, localSize, jobID},
		sizeVar: size,
		hint:    "start it with mpirun",
		match:   func(d detector) bool { return d.getenv(rank) != "" || d.getenv(size) != "" },
		read: func(d detector) (placement, error) {
			v, err := d.intVars(rank, size, localRank, localSize)
			if err != nil {
				return placement{}, err
			}
			p := mpiPlacement(d, v)
			p.jobID = d.getenv(jobID)
			return p, checkRanks(p)
		},
	}
}

// mpichReader reads MPICH's Hydra (and Intel MPI): PMI_RANK, PMI_SIZE and,
// where Hydra sets them, MPI_LOCALRANKID and MPI_LOCALNRANKS. Tasks of a
// Slurm step started with --mpi=pmi2 also have PMI_RANK: those are left to
// the Slurm reader, which knows more.
func mpichReader() launcherReader {
	const rank, size = "PMI_RANK", "PMI_SIZE"
	const localRank, localSize = "MPI_LOCALRANKID", "MPI_LOCALNRANKS"
	const kvs = "PMI_KVSNAME"
	return launcherReader{
		name:    LauncherMPICH,
		vars:    []string{rank, size, localRank, localSize, kvs},
		sizeVar: size,
		hint:    "start it with mpiexec",
		match: func(d detector) bool {
			if d.getenv(rank) == "" && d.getenv(size) == "" {
				return false
			}
			slurmTask := d.getenv("SLURM_STEP_ID") != "" && d.getenv("SLURM_PROCID") == d.getenv(rank)
			return !slurmTask || d.getenv(localRank) != ""
		},
		read: func(d detector) (placement, error) {
			v, err := d.intVars(rank, size)
			if err != nil {
				return placement{}, err
			}
			local, ok, err := d.optionalInts(localRank, localSize)
			if err != nil {
				return placement{}, err
			}
			if !ok {
				local = []int{-1, -1}
			}
			p := mpiPlacement(d, append(v, local...))
			// Hydra names no job; its proxy, the parent of every rank on a
			// host, is the same for the whole job on one host.
			p.jobID = d.getenv(kvs)
			if p.jobID == "" && p.rdvHost == loopback {
				p.jobID = "hydra-proxy-" + strconv.Itoa(d.ppid)
			}
			return p, checkRanks(p)
		},
	}
}

// mpiPlacement builds the placement of an MPI rank from rank, size, local
// rank and local size (-1 when unknown). A job whose ranks all share this
// host serves the rendezvous on the loopback address.
func mpiPlacement(d detector, v []int) placement {
	p := placement{rank: v[0], size: v[1], localRank: v[2], localSize: v[3],
		crossRank: -1, crossSize: -1, host: d.hostname}
	if p.localSize == p.size {
		p.rdvHost = loopback
		p.crossRank, p.crossSize = 0, 1
	}
	return p
}

// torchrunReader reads the variables of torchrun and of anything that
// imitates it (a Kubernetes Indexed Job, a shell loop): RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, and LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK
// where set. Under torchrun itself (TORCHELASTIC_RUN_ID set) the agent's
// store holds MASTER_PORT, so the rendezvous takes the port after it.
func torchrunReader() launcherReader {
	const rank, size, addr, port = "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"
	const localRank, localSize, group, runID = "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"
	return launcherReader{
		name:    LauncherTorchrun,
		vars:    []string{rank, size, localRank, localSize, group, addr, port, runID},
		sizeVar: size,
		hint:    "set RANK as well",
		match:   func(d detector) bool { return d.getenv(rank) != "" && d.getenv(size) != "" },
		read: func(d detector) (placement, error) {
			v, err := d.intVars(rank, size)
			if err != nil {
				return placement{}, err
			}
			p := placement{rank: v[0], size: v[1], localRank: -1, localSize: -1, crossRank: -1, crossSize: -1,
				host: d.hostname, rdvHost: d.getenv(addr)}
			if local, ok, err := d.optionalInts(localRank, localSize); err != nil {
				return placement{}, err
			} else if ok {
				p.localRank, p.localSize = local[0], local[1]
			}
			if err := torchrunPort(d, &p, port, runID); err != nil {
				return placement{}, err
			}
			return p, checkRanks(p)
		},
	}
}

// torchrunPort sets the rendezvous port and job id from MASTER_PORT (the
// port after it under torchrun's agent) and TORCHELASTIC_RUN_ID.
func torchrunPort(d detector, p *placement, portVar, runIDVar string) error {
	if p.size > 1 && p.rdvHost != "" && d.getenv(portVar) == "" && d.getenv(EnvRendezvousPort) == "" {
		return fmt.Errorf("MASTER_ADDR is set but MASTER_PORT is not")
	}
	if s := d.getenv(portVar); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n >= 1<<16-1 {
			return fmt.Errorf("%s=%q: want a port number", portVar, clip(s, maxQuoted))
		}
		p.rdvPort = n
		if d.getenv(runIDVar) != "" {
			p.rdvPort = n + 1
		}
	}
	p.jobID = d.getenv(runIDVar)
	if p.jobID == "" && p.rdvHost != "" {
		p.jobID = p.rdvHost + ":" + strconv.Itoa(p.rdvPort)
	}
	return nil
}
