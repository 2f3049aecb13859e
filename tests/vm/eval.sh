# The evaluation's runner (`cargo xtask eval`, xtask/src/eval): one
# scenario under every scheduler in turn, EEVDF first, in this one boot.
# Each run starts the scenario's workload as new processes (placement is
# decided anew every run) with the tracepoint observer beside it, the same
# for every scheduler.
#
#   EVAL_SCHEDS      how many schedulers; EVAL_SCHED_<i> is `eevdf`,
#                    `pinned-all` or `pinned-partial` (EEVDF, the workload
#                    pins its tasks: $pin), `skip` (not available: the
#                    host says why) or a sched_ext scheduler's command line
#                    (word-split)
#   EVAL_RUNS        runs per scheduler
#   EVAL_SECONDS     seconds per run
#   EVAL_ARG         the scenario's parameter (gangs: how many)
#   EVAL_NATIVE      set (cargo xtask eval --native): on a real machine;
#                    count the PMU's cache references and misses around
#                    every run, and never format a device
#   EVAL_PVAS_DIR    where the pvas scenario puts its space (natively: a
#                    DAX mount of persistent memory; required there)
#                    instead of formatting and mounting the VM's NVDIMM
#   $1               the scenario: workload function wl_<scenario> below
#
# Prints `eval-run sched=I run=R` before each run, its result lines as
# `result sched=I run=R ...`, and `eval-sched sched=I started=0|1
# errors=N exit=RC` after each scheduler.
. ./lib.sh

scenario=$1
# Loading a large BPF scheduler under TCG can take a while: scx_lavd took
# 10 s in most boots and more than 60 s in one.
export SKY_START_WAIT_S=${SKY_START_WAIT_S:-180}
runs=${EVAL_RUNS:-3}
secs=${EVAL_SECONDS:-4}
cpus=$(nproc)

# SKY-1: twice as many processes as CPUs computing over 4 KB arrays
# (every 16 bytes: the simulator's line) in 2 ms bursts with 0.2 ms
# sleeps, started at once from one CPU; the run is one cache-model phase.
wl_sky1() {
	sky-work cache-loop --procs $((2 * cpus)) --array-kb 4 --stride 16 \
		--burst-us 2000 --sleep-us 200 --seconds "$secs" --mark-phase
}

# with_hogs COMMAND...: a CPU hog on every CPU, started first, while
# COMMAND runs, then the hogs' result. The hogs run until COMMAND ends
# (start-up takes a second or two under TCG), so no part of its run is
# without them.
with_hogs() {
	sky-work burn --threads "$cpus" --seconds 600 >/tmp/burn.out &
	burn=$!
	sleep 0.2
	"$@"
	kill -TERM "$burn"
	wait "$burn"
	cat /tmp/burn.out
}

# Wake-up latency under a mixed load: a CPU hog on every CPU and two
# ping-pong pairs (a wakeup every round trip), started hogs first.
wl_latency() {
	with_hogs sky-work pingpong --pairs 2 --seconds "$secs"
}

# Mixed: SKY-1's arrays (one process per CPU) beside a hog per CPU and two
# ping-pong pairs, started hogs, arrays, pairs: cache affinity and wake-up
# latency judged in one run, each for its own group.
arrays_and_pairs() {
	sky-work cache-loop --procs "$cpus" --array-kb 4 --stride 16 \
		--burst-us 2000 --sleep-us 200 --seconds "$secs" >/tmp/arrays.out &
	arrays=$!
	sleep 0.2
	sky-work pingpong --pairs 2 --seconds "$secs"
	wait "$arrays"
	cat /tmp/arrays.out
}
wl_mixed() {
	with_hogs arrays_and_pairs
}

# schbench-style requests: 2 message threads, 8 workers each, 500 us of
# work a request, at half and then nine tenths of the CPUs.
wl_schbench() {
	for load in 0.5 0.9; do
		sky-work schbench --load "$load" --seconds "$secs"
	done
}

# Scheduler overhead: a hackbench-style storm (one ping-pong pair per CPU)
# alone, for its throughput; then again beside the kernel's BPF statistics
# (which slow every callback a little), for what the callbacks cost.
wl_overhead() {
	sky-work pingpong --pairs "$cpus" --seconds "$secs"
	[ "$(state)" = enabled ] || return 0
	sky-work pingpong --pairs "$cpus" --seconds "$secs" >/dev/null &
	storm=$!
	sky-work bpf-cost --seconds "$secs"
	wait "$storm"
}

# Tasks named for the class hints and the observers (links to sky-work:
# a process is named at exec).
named_work /tmp/eval-bin pm-writer cpu-idiv mb-a mb-b mb-c mb-d

# start NAME ARGS...: a named task in the background, its output kept.
start() {
	started=$((started + 1))
	name=$1
	shift
	"/tmp/eval-bin/$name" "$@" >"/tmp/eval-out.$started" 2>&1 &
	pids="$pids $!"
}
started=0

# Seed 000: two PM writers and two integer-division tasks on 2 cores x 2
# threads, started PM, compute, PM, compute: a placement that fills idle
# cores first and ignores the classes leaves the second writer's sibling
# to chance. Two generations per run, each started anew as new processes,
# so the placement is decided twice a run.
wl_smt() {
	pids=
	rm -f /tmp/eval-out.*
	half=$(awk "BEGIN { print $secs / 2 }")
	for gen in 1 2; do
		for k in 1 2; do
			start pm-writer pm-write --file "/tmp/eval-pm-$k" --size-mb 64 --seconds "$half"
			sleep 0.1
			start cpu-idiv compute --kind idiv --seconds "$half"
			sleep 0.1
		done
		# shellcheck disable=SC2086
		wait $pids
		pids=
	done
	cat /tmp/eval-out.*
}

# socket_cpus S: the CPUs of socket S, space-separated.
socket_cpus() {
	for d in /sys/devices/system/cpu/cpu[0-9]*; do
		[ "$(cat "$d/topology/physical_package_id")" = "$1" ] && echo "${d##*cpu}"
	done | sort -n | tr '\n' ' '
}

# gang_cpus K: `--cpus` for gang K's 3 walkers when $pin says where: all
# in socket K mod 2, or partial (two there, the third on the other
# socket); gangs sharing a socket start 3 CPUs apart.
gang_cpus() {
	[ -n "$pin" ] || return 0
	o=$((3 * ($1 / 2)))
	home=$(socket_cpus $(($1 % 2)))
	away=$(socket_cpus $((($1 + 1) % 2)))
	pick() { echo "$1" | awk -v o="$2" -v n="$3" \
		'{ for (t = 0; t < n; t++) printf "%s%s", t ? "," : "", $((o + t) % NF + 1) }'; }
	case $pin in
	all) echo "--cpus $(pick "$home" "$o" 3)" ;;
	partial) echo "--cpus $(pick "$home" "$o" 2),$(pick "$away" "$o" 1)" ;;
	esac
}

# Seed 003: EVAL_ARG memory-bound gangs of 3 threads walking a shared 3 MiB
# buffer each (one fits a socket's 4 MiB LLC, two do not) and 2 compute
# tasks started first. The cache-model phase leaves out start-up (buffer
# set-up) and the end.
wl_gangs() {
	pids=
	rm -f /tmp/eval-out.*
	for k in 1 2; do
		start cpu-idiv compute --kind idiv --seconds "$secs"
	done
	sleep 0.2
	k=0
	for g in a b c d; do
		[ "$k" -ge "$EVAL_ARG" ] && break
		# shellcheck disable=SC2046
		start "mb-$g" gang --threads 3 --mb 3 --seconds "$secs" $(gang_cpus $k)
		k=$((k + 1))
		sleep 0.1
	done
	sleep 0.5
	sky-work cache-phase begin
	sleep "$((secs - 1))"
	sky-work cache-phase end
	# shellcheck disable=SC2086
	wait $pids
	cat /tmp/eval-out.*
}

# Seeds 004 and 002: sky_pvas's messaging and queue on the emulated NVDIMM
# (mounted once, by prepare_pvas), the members placed by the scheduler.
prepare_pvas() {
	[ -n "$EVAL_PVAS_DIR" ] && return 0
	if [ -n "$EVAL_NATIVE" ]; then
		echo "eval.sh: natively the pvas scenario needs EVAL_PVAS_DIR (a DAX mount)"
		return 1
	fi
	pmem_dax_mount /mnt/pmem
}
wl_pvas() {
	dir=${EVAL_PVAS_DIR:-/mnt/pmem}/eval
	mkdir -p "$dir"
	sky-pvas-bench --eval "$dir"
}

# Natively (EVAL_NATIVE): the PMU's cache references and misses on all CPUs
# while the workload runs, from perf stat (counting until SIGINT), summed
# over PMUs (hybrid CPUs list one line per core type).
start_perf() {
	perf stat -a -x, -o /tmp/eval-perf.csv -e cache-references,cache-misses &
	PERF_PID=$!
	sleep 0.2
}
stop_perf() {
	kill -INT "$PERF_PID"
	wait "$PERF_PID"
	awk -F, '$3 ~ /cache-references/ { r += $1 } $3 ~ /cache-misses/ { m += $1 }
		END { print "result perf=cache cache_references=" r + 0 " cache_misses=" m + 0 }' \
		/tmp/eval-perf.csv
}

if ! type "wl_$scenario" >/dev/null 2>&1; then
	echo "eval.sh: no scenario $scenario"
	exit 2
fi
if type "prepare_$scenario" >/dev/null 2>&1 && ! "prepare_$scenario"; then
	echo "eval.sh: the $scenario scenario's set-up failed"
	exit 1
fi
echo "eval-header scenario=$scenario date=$(date -u +%Y-%m-%d) kernel=$(uname -r)" \
	"cpus=$cpus runs=$runs seconds=$secs"

# tag I R: the run's identity on every result line.
tag() {
	sed "s/^result /result sched=$1 run=$2 /"
}

i=0
while [ "$i" -lt "${EVAL_SCHEDS:-1}" ]; do
	eval "cmd=\$EVAL_SCHED_$i"
	pin=
	case $cmd in
	pinned-*)
		pin=${cmd#pinned-}
		cmd=eevdf
		;;
	esac
	if [ "$cmd" = skip ]; then
		echo "eval-sched sched=$i started=0 skipped=1"
		i=$((i + 1))
		continue
	fi
	before=$(dmesg_errors | wc -l)
	if [ "$cmd" != eevdf ]; then
		# The command line is word-split into its arguments on purpose,
		# without globbing (class rules hold `*`).
		set -f
		# shellcheck disable=SC2086
		set -- $cmd
		set +f
		if ! start_sched "$@"; then
			echo "eval-sched sched=$i started=0"
			i=$((i + 1))
			continue
		fi
	fi
	run=1
	while [ "$run" -le "$runs" ]; do
		echo "eval-run sched=$i run=$run"
		start_trace || echo "result failed=observer-start" | tag "$i" "$run"
		[ -n "$EVAL_NATIVE" ] && start_perf
		out=$("wl_$scenario" "$run" 2>&1)
		[ -n "$EVAL_NATIVE" ] && stop_perf | tag "$i" "$run"
		echo "$out" | grep -v '^result ' | head -n 20
		echo "$out" | grep '^result ' | tag "$i" "$run"
		[ "$cmd" = eevdf ] || echo "result state=$(state)" | tag "$i" "$run"
		# Not in a pipe: stop_trace must wait for its own child.
		stop_trace >/tmp/stop-trace.out
		tag "$i" "$run" </tmp/stop-trace.out
		grep -q '^check trace_exit=0$' /tmp/stop-trace.out ||
			echo "result failed=observer" | tag "$i" "$run"
		echo "$out" | grep -q '^result ' || echo "result failed=workload" | tag "$i" "$run"
		run=$((run + 1))
	done
	rc=0
	if [ "$cmd" != eevdf ]; then
		stop_sky >/tmp/stop.out 2>&1
		rc=$(sed -n 's/^check sky_exit=//p' /tmp/stop.out)
	fi
	errors=$(($(dmesg_errors | wc -l) - before))
	[ "$errors" -gt 0 ] && dmesg_errors | tail -n "$errors"
	echo "eval-sched sched=$i started=1 errors=$errors exit=${rc:-1}"
	i=$((i + 1))
done
echo "check eval_done=1"
