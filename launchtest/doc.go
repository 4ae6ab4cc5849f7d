// Package launchtest holds the end-to-end tests of the ways a gorovod job
// can be started, each with real processes: Open MPI's mpirun, MPICH's
// mpiexec, torchrun-style variables and TF_CONFIG set by a shell loop, a GOROVOD_CLUSTER
// spec run by hand on emulated hosts, and a real Slurm cluster (srun,
// sbatch, and gorun inside salloc), plus the errors a user sees when a
// launcher's job cannot be joined, and what a passive observer of a lab
// link sees of a job with and without gorun --tls.
//
// The tests build gorun and the examples once. They need Debian's
// openmpi-bin, mpich, slurm-wlm and munge, and root for the network
// namespaces of the emulated hosts; without them they skip, unless
// GOROVOD_REQUIRE_CLUSTER=1 (set by test.sh, as in CI) turns a missing
// tool into a failure.
package launchtest
