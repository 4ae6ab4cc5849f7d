#!/usr/bin/env bash
# The test command of the README and of CI: installs what the tests need on
# a fresh Debian machine (OpenSSH for the remote-launch tests), then runs
# every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
if [ ${#need[@]} -gt 0 ]; then
	echo "test.sh: installing ${need[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go vet ./...
go test -race -count=1 -timeout 20m ./...
# The race detector slows element loops ~20x, so under -race the 10^6-element
# all-reduce matrix runs a slice; here it runs whole, without the detector.
go test -count=1 -timeout 10m -run 'TestAllreduceMillion' ./collective/
