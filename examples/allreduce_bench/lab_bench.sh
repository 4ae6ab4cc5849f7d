#!/usr/bin/env bash
# lab_bench.sh - all-reduce across emulated hosts: gorovod (flat ring, hierarchical, auto) next to
# Gloo (torch.distributed) and Open MPI over TCP, on one lab of internal/testlab: a network
# namespace per host with its own address and sshd, links rate-limited with tc tbf on both ends.
#
# Run as root from anywhere:  examples/allreduce_bench/lab_bench.sh
# It builds bin/gorun, bin/allreduce_bench, the lab command and the MPI benchmark, brings a lab up
# (torn down on exit, also on Ctrl-C), runs every (layout, peer) REPS times with the repetitions
# interleaved (every peer's rep 1, then every peer's rep 2, ...), and prints one markdown table of
# medians over the launches (busbw = algbw * 2(n-1)/n, GB/s; the latency row in microseconds),
# then every launch's raw numbers. Results and logs go to $OUT.
#
# Knobs (environment):
#   REPS=3                 launches per (layout, peer)
#   SIZES=64M              bytes per rank, float32 sum; comma separated, K/M/G suffixes allowed
#   RATE=2gbit             tc rate of every link, each direction, for the bandwidth layouts;
#                          RATE=none leaves the links unlimited (veth at the processor's pace)
#   LAYOUTS="2x2 4x1 2x1@lat"   HOSTSxRANKS_PER_HOST; "@lat" marks a latency layout: no rate
#                          limit, LAT_SIZE only, reported in microseconds
#   LAT_SIZE=4K            size of the latency layouts
#   PEERS="flat hier auto gloo ompi"   gorovod with --hierarchical-allreduce off / on / auto,
#                          Gloo, Open MPI (pml ob1, btl tcp,self); "tls" is gorovod flat with
#                          --tls (every TCP link inside TLS 1.3), not run unless named
#                          (PEERS="flat tls" measures what TLS costs); "host" is gorovod auto
#                          with --tcp-congestion host (the hosts' default congestion control on
#                          the links between them, where gorovod's default is Reno), not run unless
#                          named; "cc-NAME" (cc-bbr, cc-cubic, ...) is gorovod auto with
#                          --tcp-congestion NAME; "reno" is gorovod flat with --tcp-congestion reno; "alt" is gorovod flat
#                          with the allreduce_bench binary $ALT_BENCH (another build, for A/B
#                          pairs against "flat" in the same run), not run unless named;
#                          "tcpxK" (tcpx1, tcpx2, tcpx4, ...) is no library: peers/tcpexchange, both
#                          hosts writing the same bytes to each other at once over K plain sockets per
#                          direction, no reduction: the bytes of a two-rank all-reduce moved
#                          plainly, and whether more sockets move them faster (2x1 layouts only;
#                          n/a elsewhere), not run unless named
#   TCPX_CONGESTION=reno   the tcpx peers' congestion control, as gorovod's links between hosts
#                          by default ("host": the hosts' default)
#                          "iperf3" and "iperf3-reno" are one iperf3 stream from the second host to
#                          the first for IPERF_SECONDS=4, with the hosts' congestion control or
#                          Reno (-C reno); a stream has no size, so its rate fills every size's cell
#                          (2x1 layouts only; needs iperf3), not run unless named; IPERF_ARGS= adds
#                          arguments (--bidir: a stream each way at once; the cell is the mean of
#                          the two directions' rates)
#   BENCH_ARGS=            more arguments of every gorovod launch (e.g. "-parts 64": fused
#                          batches of 64 tensors, as training gradients go)
#   ALT_BENCH=             the binary of the "alt" peer (go build -o FILE ./examples/allreduce_bench)
#   BUDGET=1.5 WARM_BUDGET=0.5   seconds of timed samples / warm-up per size (soft)
#   RUN_TIMEOUT=240        hard limit per launch (s); a launch past it is killed and reported
#   OUT=/tmp/gorovod-lab-bench   results.md, raw.tsv, logs/
#   GLOO_BENCH=peers/gloo_allreduce.py   the Gloo peer (its --worker mode, one per rank)
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REPS=${REPS:-3}
SIZES=${SIZES:-64M}
RATE=${RATE:-2gbit}
LAYOUTS=${LAYOUTS:-"2x2 4x1 2x1@lat"}
LAT_SIZE=${LAT_SIZE:-4K}
PEERS=${PEERS:-"flat hier auto gloo ompi"}
BUDGET=${BUDGET:-1.5}
WARM_BUDGET=${WARM_BUDGET:-0.5}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
OUT=${OUT:-/tmp/gorovod-lab-bench}
GLOO_BENCH=${GLOO_BENCH:-$HERE/peers/gloo_allreduce.py}
BENCH_ARGS=${BENCH_ARGS:-}
ALT_BENCH=${ALT_BENCH:-}
TCPX_CONGESTION=${TCPX_CONGESTION:-reno}
IPERF_SECONDS=${IPERF_SECONDS:-4}
IPERF_ARGS=${IPERF_ARGS:-}
PY=/usr/bin/python3 # Debian's python3-torch is importable by Debian's python only

T0=$(date +%s)
log() { printf '[%4ds] %s\n' $(($(date +%s) - T0)) "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (network namespaces, links, sshd)"
mkdir -p "$OUT/bin" "$OUT/logs" || die "cannot make $OUT"
STATE=$OUT/state # the lab command's state directory (state.json, lab.env)
LAB=$OUT/bin/lab
RAW=$OUT/raw.tsv

# ---------------------------------------------------------------- build
cd "$ROOT" || exit 1
log "building bin/gorun, bin/allreduce_bench and the lab command"
go build -o bin/gorun ./cmd/gorun && go build -o bin/allreduce_bench ./examples/allreduce_bench &&
	go build -o "$LAB" ./internal/testlab/cmd/lab &&
	go build -o "$OUT/bin/tcpexchange" ./examples/allreduce_bench/peers/tcpexchange || die "go build failed"
MPICC=$(command -v mpicc.openmpi || command -v mpicc || true)
MPIRUN=$(command -v mpirun.openmpi || command -v mpirun || true)
MPI_BENCH=$OUT/bin/mpi_allreduce
MPI_OK=0
if [ -n "$MPICC" ] && [ -n "$MPIRUN" ] && "$MPICC" -O2 -o "$MPI_BENCH" "$HERE/peers/mpi_allreduce.c"; then
	MPI_OK=1
else
	log "Open MPI (openmpi-bin, libopenmpi-dev) missing: its column shows n/a"
fi
GLOO_OK=0
if [ -f "$GLOO_BENCH" ] &&
	$PY -c 'import sys, torch.distributed as d; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)' 2>/dev/null; then
	GLOO_OK=1
else
	log "no torch with gloo (python3-torch): its column shows n/a"
fi
# A Gloo benchmark whose workers meet at tcp://127.0.0.1:PORT would meet on one host's loopback;
# this shim runs it with that address replaced by $MASTER_ADDR, the first host's
# (peers/gloo_allreduce.py reads $MASTER_ADDR itself).
GLOO_SHIM=$OUT/bin/gloo_lab.py
cat >"$GLOO_SHIM" <<'EOF'
import os, runpy, sys
import torch.distributed as dist
_init = dist.init_process_group
def _lab_init(backend, init_method=None, **kw):
    if init_method:
        init_method = init_method.replace("127.0.0.1", os.environ["MASTER_ADDR"])
    return _init(backend, init_method=init_method, **kw)
dist.init_process_group = _lab_init
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF

# ---------------------------------------------------------------- sizes, layouts, rate
# to_bytes 64M -> 67108864
to_bytes() {
	local s=$1 m=1
	case $s in
	*[kK]) m=1024 s=${s%?} ;; *[mM]) m=1048576 s=${s%?} ;; *[gG]) m=1073741824 s=${s%?} ;;
	esac
	case $s in '' | *[!0-9]*) die "bad size $1" ;; esac
	echo $((s * m))
}
bytes_list() { # 4K,64M -> 4096,67108864
	local out= s
	for s in ${1//,/ }; do out+=${out:+,}$(to_bytes "$s"); done
	echo "$out"
}
# rate_gbps 2gbit -> 0.25 (GB/s; tc units: bit, kbit, mbit, gbit, tbit; bps, kbps, ... are bytes)
rate_gbps() {
	echo "$1" | tr 'A-Z' 'a-z' | awk '{
		if (!match($0, /^[0-9.]+/)) { print "?"; exit }
		v = substr($0, 1, RLENGTH); u = substr($0, RLENGTH + 1)
		m["bit"] = 1/8; m["kbit"] = 1e3/8; m["mbit"] = 1e6/8; m["gbit"] = 1e9/8; m["tbit"] = 1e12/8
		m["bps"] = 1; m["kbps"] = 1e3; m["mbps"] = 1e6; m["gbps"] = 1e9; m["tbps"] = 1e12
		if (!(u in m)) { print "?"; exit }
		printf "%.3f", v * m[u] / 1e9 }'
}
SIZES_B=$(bytes_list "$SIZES")
LAT_B=$(to_bytes "$LAT_SIZE")
MAX_HOSTS=1
for lay in $LAYOUTS; do
	h=${lay%%x*}
	r=${lay#*x}; r=${r%@lat}
	case "$h$r" in '' | *[!0-9]*) die "bad layout $lay (want HOSTSxRANKS or HOSTSxRANKS@lat)" ;; esac
	[ "$h" -gt "$MAX_HOSTS" ] && MAX_HOSTS=$h
done

# ---------------------------------------------------------------- the lab
CHILDREN=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ ${#CHILDREN[@]} -gt 0 ] && kill -TERM "${CHILDREN[@]}" 2>/dev/null
	log "tearing the lab down"
	"$LAB" down -state "$STATE" >&2 || log "lab down failed: see $LAB status -state $STATE"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$LAB" down -state "$STATE" >/dev/null 2>&1 # a lab an earlier run left
log "bringing up a lab of $MAX_HOSTS hosts"
LAB_RATE_ARG=$RATE
[ "$RATE" = none ] && LAB_RATE_ARG=
"$LAB" up -state "$STATE" -hosts "$MAX_HOSTS" -rate "$LAB_RATE_ARG" >"$OUT/logs/lab-up.txt" || die "lab up failed"
sed -n '1,/^$/p' "$OUT/logs/lab-up.txt" >&2
# shellcheck disable=SC1091
. "$STATE/lab.env"
read -r -a HOST_ADDRS <<<"$LAB_HOSTS"
CUR_RATE=$LAB_RATE

set_rate() { # set_rate RATE ("" for none)
	[ "$1" = "$CUR_RATE" ] && return 0
	"$LAB" rate -state "$STATE" -rate "$1" >/dev/null || die "lab rate $1 failed"
	CUR_RATE=$1
}

# ---------------------------------------------------------------- launches
# bounded LOG CMD...: runs CMD with its output in LOG, killed after RUN_TIMEOUT s (status 124).
# In the background, so that Ctrl-C or TERM reach the traps at once.
bounded() {
	local logf=$1 rc
	shift
	timeout -k 10 "$RUN_TIMEOUT" "$@" >"$logf" 2>&1 </dev/null &
	CHILDREN=($!)
	wait "${CHILDREN[0]}"
	rc=$?
	CHILDREN=()
	return $rc
}

# gloo_launch LOG N HOSTS_CSV RANKS_PER_HOST SIZES: one worker per rank, each started in its
# host over ssh; rank 0's output goes to LOG.
gloo_launch() {
	local logf=$1 n=$2 hosts=$3 per=$4 sizes=$5 r s rc=0 pids=() port=$((20000 + RANDOM % 20000))
	local -a hs
	IFS=, read -r -a hs <<<"$hosts"
	for ((r = 0; r < n; r++)); do
		timeout -k 10 "$RUN_TIMEOUT" "$LAB_SSH" "root@${hs[r / per]}" \
			"MASTER_ADDR=${hs[0]} GLOO_SOCKET_IFNAME=$LAB_IFNAME OMP_NUM_THREADS=1 exec $PY $GLOO_SHIM" \
			"$GLOO_BENCH --worker $r --port $port -n $n -s $sizes -b $BUDGET -w $WARM_BUDGET" \
			"-l gloo --timeout $RUN_TIMEOUT" >"$logf.rank$r" 2>&1 </dev/null &
		pids+=($!)
	done
	CHILDREN=("${pids[@]}")
	for r in "${!pids[@]}"; do
		wait "${pids[r]}"
		s=$?
		[ $s != 0 ] && [ $rc = 0 ] && rc=$s # the first failure's status
	done
	CHILDREN=()
	cat "$logf.rank0" >"$logf"
	for ((r = 1; r < n; r++)); do
		[ -s "$logf.rank$r" ] && sed "s/^/[rank $r] /" "$logf.rank$r" >>"$logf"
	done
	rm -f "$logf".rank*
	return $rc
}

# iperf_launch LOG PEER SIZES: an iperf3 server on the first host for one test, a client on the
# second that sends to it for IPERF_SECONDS (retried for up to 10 s while the server is not
# listening yet; the server is stopped if no client came, and gives up IPERF_SECONDS + 30 s after
# its start), and the sender's rate as a RESULT line for every size, time = bytes / rate.
iperf_launch() {
	local logf=$1 peer=$2 sizes=$3 cc= port=$((20000 + RANDOM % 20000)) try spid rate= s
	[ "$peer" = iperf3-reno ] && cc="-C reno"
	timeout -k 5 $((IPERF_SECONDS + 30)) "$LAB_SSH" "root@${HOST_ADDRS[0]}" iperf3 -s -1 -p "$port" \
		>"$logf.server" 2>&1 </dev/null &
	spid=$!
	for try in $(seq 1 50); do
		# shellcheck disable=SC2086 # cc and IPERF_ARGS are word lists
		bounded "$logf.client" "$LAB_SSH" "root@${HOST_ADDRS[1]}" iperf3 -c "${HOST_ADDRS[0]}" -p "$port" \
			-t "$IPERF_SECONDS" $cc $IPERF_ARGS -J
		rate=$($PY -c 'import json, sys; e = json.load(sys.stdin)["end"]; r = e["sum_sent"]["bits_per_second"]
b = e.get("sum_sent_bidir_reverse"); print((r + b["bits_per_second"]) / 2 if b else r)' <"$logf.client" 2>/dev/null) && break
		rate=
		grep -q "refused" "$logf.client" || break
		sleep 0.2
	done
	[ -n "$rate" ] || kill "$spid" 2>/dev/null # no client came: the server would wait for one
	CHILDREN=($spid)
	wait "$spid"
	CHILDREN=()
	cat "$logf.client" "$logf.server" >"$logf" 2>/dev/null
	rm -f "$logf.client" "$logf.server"
	[ -n "$rate" ] || return 1
	for s in ${sizes//,/ }; do
		awk -v s="$s" -v r="$rate" -v l="$peer" 'BEGIN { t = s * 8 / r
			printf "RESULT,%s,2,%d,1,1,%.9f,%.9f,%.9f,%.4f,%.4f,ok\n", l, s, t, t, t, r / 8e9, r / 8e9 }' >>"$logf"
	done
}

# tcpx_launch LOG K SIZES: peers/tcpexchange between the first two hosts, K sockets per
# direction; rank 0's output goes to LOG.
tcpx_launch() {
	local logf=$1 k=$2 sizes=$3 r s rc=0 pids=() port=$((20000 + RANDOM % 20000))
	for r in 0 1; do
		timeout -k 10 "$RUN_TIMEOUT" "$LAB_SSH" "root@${HOST_ADDRS[r]}" "$OUT/bin/tcpexchange" -rank $r \
			-addr "${HOST_ADDRS[0]}:$port" -streams "$k" -congestion "$TCPX_CONGESTION" -s "$sizes" -b "$BUDGET" -w "$WARM_BUDGET" \
			-timeout "${RUN_TIMEOUT}s" >"$logf.rank$r" 2>&1 </dev/null &
		pids+=($!)
	done
	CHILDREN=("${pids[@]}")
	for r in 0 1; do
		wait "${pids[r]}"
		s=$?
		[ $s != 0 ] && [ $rc = 0 ] && rc=$s
	done
	CHILDREN=()
	cat "$logf.rank0" >"$logf"
	[ -s "$logf.rank1" ] && sed "s/^/[rank 1] /" "$logf.rank1" >>"$logf"
	rm -f "$logf".rank*
	return $rc
}

# launch PEER HOSTS RANKS_PER_HOST SIZES LOG: one launch of one peer.
launch() {
	local peer=$1 nh=$2 per=$3 sizes=$4 logf=$5 n=$(($2 * $3)) hosts= hflag= h
	for ((h = 0; h < nh; h++)); do
		hosts+=${hosts:+,}${HOST_ADDRS[h]}
		hflag+=${hflag:+,}${HOST_ADDRS[h]}:$per
	done
	case $peer in
	flat | hier | auto | tls | alt | reno | host | cc-[a-z]*)
		local mode=off tls=--tls=false bench=$ROOT/bin/allreduce_bench cc=
		[ "$peer" = reno ] && cc="--tcp-congestion reno"
		[ "$peer" = host ] && cc="--tcp-congestion host" mode=auto
		[ "${peer#cc-}" != "$peer" ] && cc="--tcp-congestion ${peer#cc-}" mode=auto
		[ "$peer" = hier ] && mode=on
		[ "$peer" = auto ] && mode=auto
		[ "$peer" = tls ] && tls=--tls
		if [ "$peer" = alt ]; then
			[ -x "$ALT_BENCH" ] || die "PEERS has alt but ALT_BENCH ($ALT_BENCH) is no executable"
			bench=$ALT_BENCH
		fi
		# shellcheck disable=SC2086 # LAB_GORUN_ARGS, cc and BENCH_ARGS are word lists
		bounded "$logf" env PATH="$LAB_BIN_DIR:$PATH" "$ROOT/bin/gorun" -np "$n" -H "$hflag" $LAB_GORUN_ARGS $cc \
			--hierarchical-allreduce "$mode" "$tls" "$bench" $BENCH_ARGS \
			-sizes "$sizes" -csv -budget "$BUDGET" -warm-budget "$WARM_BUDGET" -label "gorovod-$peer"
		;;
	gloo)
		[ $GLOO_OK = 1 ] || return 127
		gloo_launch "$logf" "$n" "$hosts" "$per" "$sizes"
		;;
	ompi)
		[ $MPI_OK = 1 ] || return 127
		bounded "$logf" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
			"$MPIRUN" --allow-run-as-root -np "$n" -H "$hflag" --oversubscribe --bind-to none \
			--mca plm_rsh_agent "$LAB_SSH" --mca oob_tcp_if_include "$LAB_SUBNET" \
			--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$LAB_SUBNET" --mca rtc ^hwloc \
			"$MPI_BENCH" -l ompi-tcp -s "$sizes" -b "$BUDGET" -w "$WARM_BUDGET"
		;;
	iperf3 | iperf3-reno)
		[ "$nh" = 2 ] && [ "$per" = 1 ] && command -v iperf3 >/dev/null || return 127
		iperf_launch "$logf" "$peer" "$sizes"
		;;
	tcpx[1-9] | tcpx1[0-6])
		[ "$nh" = 2 ] && [ "$per" = 1 ] || return 127
		tcpx_launch "$logf" "${peer#tcpx}" "$sizes"
		;;
	*) die "unknown peer $peer (want flat, tls, alt, reno, host, cc-NAME, hier, auto, gloo, ompi, tcpxK, iperf3, iperf3-reno)" ;;
	esac
}

printf 'layout\tpeer\trep\trc\twall_s\tbytes\tmedian_us\tbusbw_GBps\tcheck\n' >"$RAW"
for lay in $LAYOUTS; do
	nh=${lay%%x*}
	per=${lay#*x}; per=${per%@lat}
	if [ "${lay%@lat}" != "$lay" ]; then
		set_rate ""
		sizes=$LAT_B
	else
		set_rate "$LAB_RATE_ARG"
		sizes=$SIZES_B
	fi
	for rep in $(seq 1 "$REPS"); do
		for peer in $PEERS; do
			logf=$OUT/logs/${lay}_${peer}_r$rep.log
			s0=$(date +%s.%N)
			launch "$peer" "$nh" "$per" "$sizes" "$logf"
			rc=$?
			wall=$(awk -v a="$s0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
			"$LAB" reap -state "$STATE" >/dev/null 2>&1 # what a failed launch left on the hosts
			n=0
			while IFS=, read -r _ _ _ bytes _ _ med _ _ _ busbw ok; do
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$lay" "$peer" "$rep" "$rc" "$wall" "$bytes" \
					"$(awk -v m="$med" 'BEGIN { printf "%.1f", m * 1e6 }')" "$busbw" "$ok" >>"$RAW"
				n=$((n + 1))
			done < <(sed -n 's/^.*\(RESULT,\)/\1/p' "$logf" 2>/dev/null)
			if [ $n = 0 ]; then
				printf '%s\t%s\t%s\t%s\t%s\t\t\t\tno result\n' "$lay" "$peer" "$rep" "$rc" "$wall" >>"$RAW"
			fi
			what="rc=$rc"
			case $rc in 0) ;; 124 | 137) what="TIMEOUT after ${RUN_TIMEOUT}s" ;; 127) what="n/a" ;; *) what="FAILED rc=$rc" ;; esac
			log "$lay rep $rep $peer: $what, ${wall}s, $n results ($logf)"
		done
	done
done

# ---------------------------------------------------------------- tables
RATE_GBPS=$(rate_gbps "$RATE")
[ "$RATE" = none ] && RATE_GBPS="—"
summary() {
	awk -F'\t' -v peers="$PEERS" -v layouts="$LAYOUTS" -v rate="$RATE" -v limit="$RATE_GBPS" -v reps="$REPS" '
	function median(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function human(b) {
		if (b >= 1048576 && b % 1048576 == 0) return sprintf("%d MiB", b / 1048576)
		if (b >= 1024 && b % 1024 == 0) return sprintf("%d KiB", b / 1024)
		return b " B"
	}
	NR == 1 { next }
	$8 != "" && $9 == "ok" { key = $1 SUBSEP $2 SUBSEP $6; v = ($1 ~ /@lat$/) ? $7 : $8
		vals[key] = vals[key] " " v; good[key]++; sizes[$1] = sizes[$1] " " $6 }
	END {
		np = split(peers, P, " ")
		no = split((index(" " peers " ", " alt ") ? "flat alt" : "flat") (index(" " peers " ", " reno ") ? " reno" : "") (index(" " peers " ", " host ") ? " host" : "") " tls hier auto gloo ompi", order, " ")
		names["flat"] = "gorovod (flat)"; names["tls"] = "gorovod (flat, --tls)"; names["alt"] = "gorovod (flat, ALT_BENCH)"
		names["hier"] = "gorovod (hier)"; names["auto"] = "gorovod (auto)"; names["reno"] = "gorovod (flat, --tcp-congestion reno)"; names["host"] = "gorovod (auto, --tcp-congestion host)"
		names["gloo"] = "Gloo"; names["ompi"] = "Open MPI TCP"
		names["iperf3"] = "iperf3, one stream (host default)"; names["iperf3-reno"] = "iperf3 -C reno, one stream"
		for (i = 1; i <= np; i++) if (P[i] ~ /^cc-/) { order[++no] = P[i]; names[P[i]] = "gorovod (auto, --tcp-congestion " substr(P[i], 4) ")" }
		for (i = 1; i <= np; i++) if (P[i] ~ /^iperf3/) order[++no] = P[i]
		for (i = 1; i <= np; i++) if (P[i] ~ /^tcpx[0-9]+$/) {
			order[++no] = P[i]; k = substr(P[i], 5)
			names[P[i]] = "TCP exchange, " k " socket" (k > 1 ? "s" : "") " each way"
		}
		hdr = "| layout |"; sep = "|---|"
		for (i = 1; i <= no; i++) { hdr = hdr " " names[order[i]] " |"; sep = sep "---:|" }
		print hdr " flat-ring limit |"; print sep "---:|"
		nl = split(layouts, L, " ")
		for (i = 1; i <= nl; i++) {
			lay = L[i]; lat = lay ~ /@lat$/
			h = lay; sub(/x.*/, "", h); r = lay; sub(/^[0-9]+x/, "", r); sub(/@lat$/, "", r)
			split("", seen); ns = split(sizes[lay], S, " ")
			if (ns == 0) { ns = 1; S[1] = "" }
			for (k = 1; k <= ns; k++) {
				if (S[k] in seen) continue; seen[S[k]] = 1
				desc = h " hosts × " r " rank" (r > 1 ? "s" : "") (S[k] != "" ? ", " human(S[k]) : "")
				desc = lat ? "latency (µs): " desc ", no limit" : desc ", " rate
				row = "| " desc " |"
				for (j = 1; j <= no; j++) {
					p = order[j]; key = lay SUBSEP p SUBSEP S[k]
					if (index(" " peers " ", " " p " ") == 0) cell = "—"
					else if (good[key] == 0) cell = "failed"
					else {
						cell = sprintf(lat ? "%.0f" : "%.3f", median(vals[key]))
						if (good[key] < reps) cell = cell " (" good[key] "/" reps ")"
					}
					row = row " " cell " |"
				}
				print row " " (lat ? "—" : limit) " |"
			}
		}
	}' "$RAW"
}

{
	echo "## gorovod all-reduce across emulated hosts (float32 sum)"
	echo
	echo "Lab: $MAX_HOSTS network namespaces on one bridge, each with its own sshd; links limited with tc tbf"
	echo "($RATE each direction, both ends of every veth) for the bandwidth rows. Bandwidth rows: busbw in GB/s"
	echo "(algbw × 2(n−1)/n), median over $REPS launches; latency rows: median time per all-reduce in µs."
	echo "flat-ring limit = rate/8. A cell \"x (k/n)\" had only k of n launches succeed."
	echo "Machine: $(nproc) cores, $(uname -r), load at start $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	summary
	echo
	echo "### Launches"
	echo
	echo "| layout | peer | rep | exit | wall s | bytes | time µs | busbw GB/s | check |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
	tail -n +2 "$RAW" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
} | tee "$OUT/results.md"
log "done: $OUT/results.md (logs in $OUT/logs)"
