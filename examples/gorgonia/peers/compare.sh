#!/usr/bin/env bash
# compare.sh measures examples/gorgonia (the Gorgonia CNN under gorun) side
# by side with the same CNN in PyTorch DistributedDataParallel
# (torch_ddp_cnn.py, gloo, one thread a process) at np 1, 2 and 4, the
# launches interleaved round by round so that every run sees the same
# machine:
#
#   gorgonia  gorun -np N <examples/gorgonia> -epochs 1 -train-limit L -test-limit T
#   torch     torch_ddp_cnn.py --np N --epochs 1 --train-limit L --test-limit T
#
#   examples/gorgonia/peers/compare.sh                 # 3 rounds, L = 8192
#   REPS=2 LIMIT=8192 examples/gorgonia/peers/compare.sh
#
# Settings (environment): REPS rounds [3]; LIMIT training images [8192];
# TEST test images [2000]; OUT directory for the builds and logs [a new one
# under /tmp].
#
# It prints each run's training samples/s and test accuracy, then per np
# the medians over the rounds and the ratio gorgonia/torch of the samples/s.
# Needs Go, Debian's python3-torch and dataset-fashion-mnist.
set -euo pipefail

REPS=${REPS:-3}
LIMIT=${LIMIT:-8192}
TEST=${TEST:-2000}
OUT=${OUT:-$(mktemp -d /tmp/compare_cnn.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)

(cd "$root" && go build -o "$OUT/" ./cmd/gorun)
(cd "$root/examples/gorgonia" && go build -o "$OUT/gorgonia-cnn" .)
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3

# rate NAME COMMAND...: runs it and prints "samples/s accuracy"
rate() {
	local name=$1
	shift
	local log="$OUT/$name.log"
	"$@" >"$log" 2>&1 || { echo "$name failed: see $log" >&2; return 1; }
	local r a
	case $name in
	torch*)
		r=$(sed -n 's/^torch_ddp_cnn: np=.* samples\/s=\([0-9.]*\) .*/\1/p' "$log")
		a=$(sed -n 's/.* test_accuracy=\([0-9.]*\).*/\1/p' "$log")
		;;
	*)
		r=$(sed -n 's/.*epoch 1: .* \([0-9]*\) samples\/s$/\1/p' "$log" | tail -1)
		a=$(sed -n 's/.*epoch 1: .*test accuracy \([0-9.]*\),.*/\1/p' "$log" | tail -1)
		;;
	esac
	[ -n "$r" ] || { echo "$name: no samples/s in $log" >&2; return 1; }
	echo "$r ${a:--}"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A rates accs
nps=(1 2 4)
echo "# $LIMIT training images, $TEST test images, 1 epoch, global batch 64; logs in $OUT"
for rep in $(seq 1 "$REPS"); do
	echo "# round $rep"
	for np in "${nps[@]}"; do
		for side in gorgonia torch; do
			if [ $side = gorgonia ]; then
				line=$(rate "gorgonia-np$np-r$rep" "$OUT/gorun" -np "$np" "$OUT/gorgonia-cnn" \
					-epochs 1 -train-limit "$LIMIT" -test-limit "$TEST")
			else
				line=$(rate "torch-np$np-r$rep" "$py" "$here/torch_ddp_cnn.py" --np "$np" \
					--epochs 1 --train-limit "$LIMIT" --test-limit "$TEST")
			fi
			echo "$side np=$np samples/s=${line% *} test_accuracy=${line#* }"
			rates[$side$np]="${rates[$side$np]:-} ${line% *}"
			accs[$side$np]="${accs[$side$np]:-} ${line#* }"
		done
	done
done

echo "# medians over $REPS rounds: training samples/s (test accuracy), and gorgonia ÷ torch"
printf '%-3s %-18s %-18s %s\n' np gorgonia torch ratio
for np in "${nps[@]}"; do
	g=$(echo "${rates[gorgonia$np]}" | median)
	t=$(echo "${rates[torch$np]}" | median)
	ga=$(echo "${accs[gorgonia$np]}" | median)
	ta=$(echo "${accs[torch$np]}" | median)
	printf '%-3s %-18s %-18s %s\n' "$np" "$g ($ga)" "$t ($ta)" "$(awk -v a="$g" -v b="$t" 'BEGIN {printf "%.2f", a/b}')"
done
