#!/usr/bin/env bash
# compare.sh measures examples/mnist (the README's main job, under gorun)
# side by side with the same training in PyTorch DistributedDataParallel
# (torch_ddp.py: gloo, the same model, initial weights, data order and
# schedule) at np 1, 2 and 4, the launches alternating so that every run
# sees the same machine:
#
#   gorovod  gorun -np N -H localhost:N bin/mnist -epochs 1
#   torch    torch_ddp.py --np N --epochs 1 --init INIT
#
# INIT is written once by bin/mnist -write-init (the Go program's initial
# weights and first epoch's data order). Every run trains one epoch of
# Fashion-MNIST's default MLP, batch 32 per rank; the figure taken is rank
# 0's "epoch 1: ... samples/s" (every rank's samples over the epoch's
# training loop), the same line in both programs.
#
#   examples/mnist/peers/compare.sh             # 3 rounds
#   REPS=5 examples/mnist/peers/compare.sh
#
# Settings (environment): REPS rounds [3]; NPS process counts ["1 2 4"];
# OUT directory for the builds and logs [a new one under /tmp].
#
# It prints each run's samples/s and epoch-1 loss and test accuracy (the two
# sides print the same ones), then per np the medians over the rounds and
# the ratio gorovod ÷ torch. Needs Go, OpenBLAS (apt-get install
# libopenblas-dev liblapacke-dev), Debian's python3-torch and
# dataset-fashion-mnist:
#
#   sudo apt-get install -y python3-torch dataset-fashion-mnist
set -euo pipefail

REPS=${REPS:-3}
NPS=${NPS:-1 2 4}
OUT=${OUT:-$(mktemp -d /tmp/compare_ddp.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
data=/usr/share/datasets/fashion-mnist

py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "compare.sh: needs PyTorch: sudo apt-get install -y python3-torch" >&2
	exit 1
fi
if ! ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1; then
	echo "compare.sh: needs Fashion-MNIST in $data: sudo apt-get install -y dataset-fashion-mnist" >&2
	exit 1
fi

(cd "$root" && go build -o "$OUT/" ./cmd/gorun ./examples/mnist)
"$OUT/mnist" -write-init "$OUT/init.bin" -epochs 1 >"$OUT/init.log"

# run NAME COMMAND...: runs it and prints "samples/s loss accuracy" of epoch 1
run() {
	local name=$1
	shift
	local log="$OUT/$name.log"
	"$@" >"$log" 2>&1 || { echo "$name failed: see $log" >&2; return 1; }
	local line
	line=$(sed -n 's/^\(\[0\]<stdout>: \)\{0,1\}epoch 1: loss \([0-9.]*\)  test accuracy \([0-9.]*\)%  \([0-9]*\) samples\/s .*/\4 \2 \3/p' "$log")
	[ -n "$line" ] || { echo "$name: no epoch 1 line in $log" >&2; return 1; }
	echo "$line"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A rates
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); logs in $OUT"
for rep in $(seq 1 "$REPS"); do
	echo "# round $rep"
	for np in $NPS; do
		for side in gorovod torch; do
			if [ $side = gorovod ]; then
				line=$(run "gorovod-np$np-r$rep" "$OUT/gorun" -np "$np" -H "localhost:$np" "$OUT/mnist" -epochs 1)
			else
				line=$(run "torch-np$np-r$rep" "$py" "$here/torch_ddp.py" --np "$np" --epochs 1 --init "$OUT/init.bin" --data "$data")
			fi
			read -r rate loss acc <<<"$line"
			echo "$side np=$np samples/s=$rate loss=$loss test_accuracy=$acc%"
			rates[$side$np]="${rates[$side$np]:-} $rate"
		done
	done
done

echo "# medians over $REPS rounds (samples/s), and gorovod ÷ torch; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-3s %-9s %-9s %s\n' np gorovod torch ratio
for np in $NPS; do
	g=$(echo "${rates[gorovod$np]}" | median)
	t=$(echo "${rates[torch$np]}" | median)
	printf '%-3s %-9s %-9s %s\n' "$np" "$g" "$t" "$(awk -v a="$g" -v b="$t" 'BEGIN {printf "%.2f", a/b}')"
done
