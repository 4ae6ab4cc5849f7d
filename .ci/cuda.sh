#!/usr/bin/env bash
# The GPU build, checked on a machine without a GPU: installs Debian's
# nvidia-cuda-dev (non-free: cuda.h and the driver's libcuda.so to link
# against), then vets and builds every package with -tags cuda and compiles
# the test binaries of kernels/cuda and hvd, so that the cuda code cannot
# rot unseen. Running those tests needs a GPU (README, "GPUs").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s nvidia-cuda-dev >/dev/null 2>&1; then
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	# The package lives in Debian's non-free component: add it from
	# Debian's own mirror if no configured source offers the package.
	if ! apt-cache policy nvidia-cuda-dev 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		. /etc/os-release
		$SUDO tee /etc/apt/sources.list.d/gorovod-non-free.sources >/dev/null <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${VERSION_CODENAME} ${VERSION_CODENAME}-updates
Components: non-free contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
		$SUDO apt-get update -qq
	fi
	echo "cuda.sh: installing nvidia-cuda-dev (non-free)"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nvidia-cuda-dev >/dev/null
fi

go vet -tags cuda ./...
go build -tags cuda ./...
for pkg in ./kernels/cuda ./hvd; do
	go test -tags cuda -c -o /dev/null "$pkg"
done
echo "cuda.sh: go vet, go build and the test binaries of kernels/cuda and hvd pass with -tags cuda"
