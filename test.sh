#!/usr/bin/env bash
# The test command of the README and of CI: installs what the tests need on
# a fresh Debian machine (OpenSSH for the remote-launch tests, Slurm, munge,
# Open MPI and MPICH for the launcher tests, zsh and groff for the
# completion script and manual page, OpenBLAS for the training
# examples, PyTorch for examples/mnist's peer), then runs
# every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
# The launcher tests start real Slurm clusters, mpirun and mpiexec jobs.
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v mpirun.openmpi >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
command -v mpiexec.mpich >/dev/null 2>&1 || need+=(mpich)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
# gorun's zsh completion script and manual page are checked by zsh and groff.
command -v zsh >/dev/null 2>&1 || need+=(zsh)
command -v groff >/dev/null 2>&1 || need+=(groff-base)
# The dashboard's page is checked in headless Chromium (internal/dashboard).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# examples/mnist's PyTorch DDP peer is checked against the Go program.
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
# The mnist and synthetic_benchmark examples multiply matrices with OpenBLAS (cgo).
dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
dpkg -s liblapacke-dev >/dev/null 2>&1 || need+=(liblapacke-dev)
if [ ${#need[@]} -gt 0 ]; then
	echo "test.sh: installing ${need[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

export GOROVOD_REQUIRE_SSHD=1    # the ssh tests must run, not skip
export GOROVOD_REQUIRE_SLURM=1   # so must the Slurm cluster tests
export GOROVOD_REQUIRE_CLUSTER=1 # and the mpirun, mpiexec and manual-start tests
export GOROVOD_REQUIRE_TOOLS=1   # and the zsh and groff checks of gorun's completion and man page, chromium's of the dashboard, and mnist's torch peer
go vet ./...
go test -race -count=1 -timeout 20m ./...
# The race detector slows element loops ~20x, so under -race the 10^6-element
# all-reduce matrix runs a slice; here it runs whole, without the detector.
go test -count=1 -timeout 10m -run 'TestAllreduceMillion' ./collective/
# Likewise mnist's compressed-training accuracy check runs on a tenth of
# Fashion-MNIST only without the detector.
go test -count=1 -timeout 10m -run 'TestCompressedTrainingKeepsAccuracy' ./examples/mnist
# Without cgo the examples multiply matrices with gonum instead of OpenBLAS.
CGO_ENABLED=0 go test -count=1 -run 'Gemm|Dgemm' ./examples/mnist ./examples/synthetic_benchmark
# The framework adapters are nested modules (the core module's go.mod has
# no framework in it): their own vet and tests, and their examples'.
for m in frameworks/gorgonia examples/gorgonia frameworks/gomlx; do
	(cd "$m" && go vet ./... && go test -race -count=1 -timeout 10m ./...)
done
# GoMLX's own parallel executor races under the detector (its tests in
# frameworks/gomlx run the sequential one), so the GoMLX example, which
# trains with the default executor, runs without it.
(cd examples/gomlx && go vet ./... && go test -count=1 -timeout 10m ./...)
