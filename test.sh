#!/usr/bin/env bash
# The test command of the README and of CI: installs what the tests need on
# a fresh Debian machine (OpenSSH for the remote-launch tests, OpenBLAS for
# the training examples), then runs
# every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
# The mnist and synthetic_benchmark examples multiply matrices with OpenBLAS (cgo).
dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
dpkg -s liblapacke-dev >/dev/null 2>&1 || need+=(liblapacke-dev)
if [ ${#need[@]} -gt 0 ]; then
	echo "test.sh: installing ${need[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

export GOROVOD_REQUIRE_SSHD=1 # the ssh tests must run, not skip
go vet ./...
go test -race -count=1 -timeout 20m ./...
# The race detector slows element loops ~20x, so under -race the 10^6-element
# all-reduce matrix runs a slice; here it runs whole, without the detector.
go test -count=1 -timeout 10m -run 'TestAllreduceMillion' ./collective/
