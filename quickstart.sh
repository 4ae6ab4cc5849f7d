#!/usr/bin/env bash
# The README's main job: Fashion-MNIST training on 4 local ranks under gorun.
# Installs what it needs on Debian (OpenBLAS for the model's matrix products,
# the Fashion-MNIST data set), builds gorun and the example, and trains.
# Extra arguments go to the training program (e.g. -epochs 2).
set -euo pipefail
cd "$(dirname "$0")"

need=()
dpkg -s libopenblas-dev >/dev/null 2>&1 || need+=(libopenblas-dev)
dpkg -s liblapacke-dev >/dev/null 2>&1 || need+=(liblapacke-dev)
[ -d /usr/share/datasets/fashion-mnist ] || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -gt 0 ]; then
	echo "quickstart: installing ${need[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p bin
go build -o bin/gorun ./cmd/gorun
go build -o bin/mnist ./examples/mnist
exec bin/gorun -np 4 -H localhost:4 bin/mnist -epochs 5 "$@"
