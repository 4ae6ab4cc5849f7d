#!/usr/bin/env bash
# The README's main job: build gorun and the all-reduce benchmark, then run
# the benchmark on 4 local ranks under gorun. Needs Go 1.26 on PATH; installs
# nothing else (the core is pure Go).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p bin
go build -o bin/gorun ./cmd/gorun
go build -o bin/allreduce_bench ./examples/allreduce_bench
exec bin/gorun -np 4 -H localhost:4 bin/allreduce_bench -sizes 4K,64K,1M,16M,64M "$@"
