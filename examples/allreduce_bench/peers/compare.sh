#!/usr/bin/env bash
# compare.sh measures gorovod's all-reduce side by side with Open MPI's and
# MPICH's on this machine: allreduce_bench under gorun, and mpi_allreduce.c
# (the same measurement through MPI_Allreduce) under mpirun and mpiexec,
# the launches interleaved so that every peer sees the same machine.
#
#   examples/allreduce_bench/peers/compare.sh               # n = 2 and 4, 3 rounds
#   NS=4 SIZES=4096,1048576 REPS=5 examples/allreduce_bench/peers/compare.sh
#
# Settings (environment):
#   NS     rank counts                      [2 4]
#   SIZES  bytes per rank, comma separated  [4096,65536,1048576,16777216]
#   REPS   rounds of launches               [3]
#   PEERS  which to run                     [gorovod gorovod-tcp ompi-shm ompi-tcp mpich]
#            gorovod      gorun, ranks on one host through shared memory
#            gorovod-tcp  gorun --no-shared-memory: loopback TCP
#            gorovod-cma  gorun with GOROVOD_SHM_REMOTE_MIN=262144: shared
#                         memory, and segments of 256 KiB and up copied once,
#                         by the receiver from the sender's memory
#                         (process_vm_readv; not in the default set)
#            gorovod-hvd  gorun, each all-reduce a blocking hvd.Allreduce
#                         through the runtime's engine (-via hvd; not in
#                         the default set)
#            ompi-shm     Open MPI's defaults (shared memory, vader)
#            ompi-tcp     Open MPI over loopback TCP only
#            mpich        MPICH's mpiexec (shared memory)
#            gloo         torch.distributed over Gloo (loopback TCP; Debian's python3-torch)
#   BUDGET seconds of samples per size      [1.5]
#   OUT    directory for the builds and results [a new one under /tmp]
#
# It needs Go, and for the MPI peers Debian's openmpi-bin libopenmpi-dev and
# mpich, and for Gloo python3-torch (a peer whose compiler or library is
# missing is left out, with a note). It
# prints, per rank count and size, the median over the rounds of each
# peer's median time (µs) and bus bandwidth (GB/s, nccl-tests' busbw), and
# gorovod's time as a ratio of the fastest MPI peer's; then, with more than
# one round, each cell's fastest and slowest launch (µs), since a machine
# whose speed changes between launches moves a median of three a long way;
# every launch's lines stay in $OUT/results.csv.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
NS=${NS:-"2 4"}
SIZES=${SIZES:-4096,65536,1048576,16777216}
REPS=${REPS:-3}
PEERS=${PEERS:-"gorovod gorovod-tcp ompi-shm ompi-tcp mpich"}
BUDGET=${BUDGET:-1.5}
OUT=${OUT:-$(mktemp -d /tmp/gorovod-peers.XXXXXX)}
mkdir -p "$OUT"

echo "compare.sh: building into $OUT" >&2
(cd "$repo" && go build -o "$OUT/gorun" ./cmd/gorun && go build -o "$OUT/allreduce_bench" ./examples/allreduce_bench)
have() { command -v "$1" >/dev/null 2>&1; }
peers=()
for p in $PEERS; do
	case $p in
	gorovod | gorovod-tcp | gorovod-cma | gorovod-hvd) peers+=("$p") ;;
	ompi-shm | ompi-tcp)
		if have mpicc.openmpi && have mpirun.openmpi; then
			[ -x "$OUT/mpi_allreduce_ompi" ] || mpicc.openmpi -O2 -o "$OUT/mpi_allreduce_ompi" "$here/mpi_allreduce.c"
			peers+=("$p")
		else
			echo "compare.sh: no mpicc.openmpi or mpirun.openmpi (apt install openmpi-bin libopenmpi-dev): $p left out" >&2
		fi
		;;
	mpich)
		if have mpicc.mpich && have mpiexec.mpich; then
			mpicc.mpich -O2 -o "$OUT/mpi_allreduce_mpich" "$here/mpi_allreduce.c"
			peers+=("$p")
		else
			echo "compare.sh: no mpicc.mpich or mpiexec.mpich (apt install mpich): $p left out" >&2
		fi
		;;
	gloo)
		if /usr/bin/python3 -c 'import sys, torch.distributed as d; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)' 2>/dev/null; then
			peers+=("$p")
		else
			echo "compare.sh: no torch with Gloo for /usr/bin/python3 (apt install python3-torch): $p left out" >&2
		fi
		;;
	*)
		echo "compare.sh: unknown peer $p (want gorovod, gorovod-tcp, gorovod-cma, gorovod-hvd, ompi-shm, ompi-tcp, mpich or gloo)" >&2
		exit 2
		;;
	esac
done

# The MPI launchers refuse root unless told, and need --oversubscribe for
# more ranks than processors.
ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)
sample=(-b "$BUDGET" -w 0.5)

# command prints the launch of peer with n ranks.
command_of() {
	local peer=$1 n=$2
	case $peer in
	gorovod) echo "$OUT/gorun" -np "$n" "$OUT/allreduce_bench" -csv -label gorovod -sizes "$SIZES" -budget "$BUDGET" ;;
	gorovod-tcp) echo "$OUT/gorun" -np "$n" --no-shared-memory "$OUT/allreduce_bench" -csv -label gorovod-tcp -sizes "$SIZES" -budget "$BUDGET" ;;
	gorovod-cma) echo env GOROVOD_SHM_REMOTE_MIN=262144 "$OUT/gorun" -np "$n" "$OUT/allreduce_bench" -csv -label gorovod-cma -sizes "$SIZES" -budget "$BUDGET" ;;
	gorovod-hvd) echo "$OUT/gorun" -np "$n" "$OUT/allreduce_bench" -via hvd -csv -label gorovod-hvd -sizes "$SIZES" -budget "$BUDGET" ;;
	ompi-shm) echo "${ompi[@]}" -np "$n" "$OUT/mpi_allreduce_ompi" -l ompi-shm -s "$SIZES" "${sample[@]}" ;;
	ompi-tcp) echo "${ompi[@]}" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo -np "$n" "$OUT/mpi_allreduce_ompi" -l ompi-tcp -s "$SIZES" "${sample[@]}" ;;
	mpich) echo mpiexec.mpich -n "$n" "$OUT/mpi_allreduce_mpich" -l mpich -s "$SIZES" "${sample[@]}" ;;
	gloo) echo /usr/bin/python3 "$here/gloo_allreduce.py" -n "$n" -l gloo -s "$SIZES" "${sample[@]}" ;;
	esac
}

: >"$OUT/results.csv"
for rep in $(seq "$REPS"); do
	for n in $NS; do
		for peer in "${peers[@]}"; do
			cmd=$(command_of "$peer" "$n")
			log="$OUT/$peer.n$n.r$rep.log"
			echo "compare.sh: round $rep/$REPS: $cmd" >&2
			if ! timeout 600 $cmd >"$log" 2>&1 || ! grep -q '# done' "$log"; then
				echo "compare.sh: $peer at n=$n failed; its output:" >&2
				tail -20 "$log" >&2
				exit 1
			fi
			# gorun prefixes each line with its rank and stream.
			sed -n 's/^\(\[0\]<stdout>: \)\{0,1\}\(RESULT,.*\)$/\2/p' "$log" >>"$OUT/results.csv"
		done
	done
done

if grep -q ',FAIL$' "$OUT/results.csv"; then
	echo "compare.sh: some results were wrong:" >&2
	grep ',FAIL$' "$OUT/results.csv" >&2
	exit 1
fi

# The table: medians over the rounds, per n, size and peer.
awk -F, -v peers="${peers[*]}" '
function median(list,   a, m, i, j, t) {
	m = split(list, a, " ")
	for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
{
	key = $3 SUBSEP $4 SUBSEP $2
	t[key] = t[key] " " $7 * 1e6; bw[key] = bw[key] " " $11
	if (++launches[key] > 1) rounds = 1
	if (!seen[$3 SUBSEP $4]++) { rows[++nrows] = $3 SUBSEP $4 }
}
END {
	np = split(peers, p, " ")
	printf "%-4s %-10s", "n", "bytes"
	for (i = 1; i <= np; i++) printf " %24s", p[i] " µs, GB/s"
	printf " %12s\n", "gorovod/MPI"
	for (r = 1; r <= nrows; r++) {
		split(rows[r], nk, SUBSEP)
		printf "%-4s %-10s", nk[1], nk[2]
		best = 0; ours = 0
		for (i = 1; i <= np; i++) {
			key = rows[r] SUBSEP p[i]
			if (!(key in t)) { printf " %24s", "-"; continue }
			mt = median(t[key]); mb = median(bw[key])
			printf " %14.1f %9.3f", mt, mb
			if (p[i] == "gorovod") ours = mt
			if (p[i] ~ /^(ompi|mpich)/ && (best == 0 || mt < best)) best = mt
		}
		if (ours > 0 && best > 0) printf " %12.2f", ours / best; else printf " %12s", "-"
		printf "\n"
	}
	if (!rounds) exit
	printf "\n# time per launch (µs): the fastest and the slowest of the rounds\n"
	printf "%-4s %-10s", "n", "bytes"
	for (i = 1; i <= np; i++) printf " %24s", p[i]
	printf "\n"
	for (r = 1; r <= nrows; r++) {
		split(rows[r], nk, SUBSEP)
		printf "%-4s %-10s", nk[1], nk[2]
		for (i = 1; i <= np; i++) {
			key = rows[r] SUBSEP p[i]
			if (!(key in t)) { printf " %24s", "-"; continue }
			m = split(t[key], a, " "); lo = a[1]; hi = a[1]
			for (j = 2; j <= m; j++) { if (a[j] < lo) lo = a[j]; if (a[j] > hi) hi = a[j] }
			printf " %24s", sprintf("%.1f-%.1f", lo, hi)
		}
		printf "\n"
	}
}' "$OUT/results.csv"
echo "compare.sh: every launch's RESULT lines are in $OUT/results.csv" >&2
