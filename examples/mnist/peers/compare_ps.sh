#!/usr/bin/env bash
# compare_ps.sh measures gorovod's parameter-server mode side by side with
# its peers on this machine, the launches interleaved round by round so
# that every run sees the same machine:
#
#   ps        gorun --ps 2 -np 2 bin/mnist -mode ps          (2 servers, 2 workers, a chief)
#   ps32      the same with -ps-wire float32
#   torch     examples/mnist/peers/torch_ps.py --ps 2 --workers 2 (PyTorch RPC, TensorPipe)
#   allreduce gorun -np 4 bin/mnist                            (4 ranks, the all-reduce mode)
#   scale     gorun --ps 2 -np W bin/mnist -mode ps for W = 1, 2, 4
#
# Every run trains one epoch of Fashion-MNIST's default MLP with batch 32
# per worker (rank), or -max-steps steps where STEPS is set.
#
#   examples/mnist/peers/compare_ps.sh                  # 3 rounds
#   REPS=5 examples/mnist/peers/compare_ps.sh
#
# Settings (environment): REPS rounds [3]; STEPS steps per run, 0 = one
# epoch [0]; OUT directory for the builds [a new one under /tmp].
#
# It prints each run's samples/s and round trip, then per peer the median
# over the rounds and its ratio to gorovod's ps mode. Needs Go, Debian's
# python3-torch and dataset-fashion-mnist (without the dataset both sides
# train on their synthetic sets and say so).
set -euo pipefail

REPS=${REPS:-3}
STEPS=${STEPS:-0}
OUT=${OUT:-$(mktemp -d /tmp/compare_ps.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)

(cd "$root" && go build -o "$OUT/" ./cmd/gorun ./examples/mnist)
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3

steps=()
[ "$STEPS" -gt 0 ] && steps=(-max-steps "$STEPS")
tsteps=()
[ "$STEPS" -gt 0 ] && tsteps=(--max-steps "$STEPS")

# rate RUN-NAME COMMAND...: runs it and prints "name samples/s round-trip"
rate() {
	local name=$1
	shift
	local log="$OUT/$name.log"
	"$@" >"$log" 2>&1 || { echo "$name failed: see $log" >&2; return 1; }
	local r rt
	if [ "$name" = torch ]; then
		r=$(sed -n 's/.*samples\/s=\([0-9.]*\).*/\1/p' "$log")
		rt=$(sed -n 's/.*roundtrip_ms_median=\([0-9.]*\).*/\1ms/p' "$log")
	else
		r=$(sed -n 's/.*epoch 1: .* \([0-9]*\) samples\/s (.*/\1/p' "$log" | tail -1)
		[ -n "$r" ] || r=$(sed -n 's/.*epoch 1 \[.*\] .* \([0-9]*\) samples\/s$/\1/p' "$log" | tail -1)
		rt=$(sed -n 's/.*round trip median \([^,]*\),.*/\1/p' "$log")
	fi
	echo "$name $r ${rt:--}"
}

declare -A all
for rep in $(seq 1 "$REPS"); do
	echo "# round $rep"
	runs=(
		"ps:$OUT/gorun --ps 2 -np 2 -H localhost:4 $OUT/mnist -mode ps -epochs 1 ${steps[*]:-}"
		"ps32:$OUT/gorun --ps 2 -np 2 -H localhost:4 $OUT/mnist -mode ps -ps-wire float32 -epochs 1 ${steps[*]:-}"
		"torch:$py $here/torch_ps.py --ps 2 --workers 2 --epochs 1 --batch 32 ${tsteps[*]:-}"
		"allreduce:$OUT/gorun -np 4 $OUT/mnist -epochs 1 ${steps[*]:-}"
		"ps-w1:$OUT/gorun --ps 2 -np 1 -H localhost:3 $OUT/mnist -mode ps -epochs 1 ${steps[*]:-}"
		"ps-w4:$OUT/gorun --ps 2 -np 4 -H localhost:6 $OUT/mnist -mode ps -epochs 1 ${steps[*]:-}"
	)
	for r in "${runs[@]}"; do
		name=${r%%:*}
		# shellcheck disable=SC2086
		line=$(rate "$name" ${r#*:})
		echo "$line"
		all[$name]="${all[$name]:-} $(echo "$line" | cut -d' ' -f2)"
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(echo "${all[ps]}" | median)
echo "# medians over $REPS rounds (samples/s), and gorovod ps mode's ratio to each (ps ÷ it; ps = $base)"
for name in ps ps32 torch allreduce ps-w1 ps-w4; do
	m=$(echo "${all[$name]}" | median)
	echo "$name $m $(awk -v a="$base" -v b="$m" 'BEGIN {printf "%.2f", a/b}')"
done
