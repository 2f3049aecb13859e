# The evaluation's runner (`cargo xtask eval`, xtask/src/eval): one
# scenario under every scheduler in turn, EEVDF first, in this one boot.
# Each run starts the scenario's workload as new processes (placement is
# decided anew every run) with the tracepoint observer beside it, the same
# for every scheduler.
#
#   EVAL_SCHEDS      how many schedulers; EVAL_SCHED_<i> is `eevdf`, `skip`
#                    (not available: the host says why) or a sched_ext
#                    scheduler's command line (word-split)
#   EVAL_RUNS        runs per scheduler
#   EVAL_SECONDS     seconds per run
#   EVAL_ARG         the scenario's parameter (gangs: how many)
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

# Wake-up latency under a mixed load: a CPU hog on every CPU and two
# ping-pong pairs (a wakeup every round trip), started hogs first.
wl_latency() {
	sky-work burn --threads "$cpus" --seconds "$secs" >/tmp/burn.out &
	burn=$!
	sleep 0.2
	sky-work pingpong --pairs 2 --seconds "$secs"
	wait "$burn"
	cat /tmp/burn.out
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
mkdir -p /tmp/eval-bin
for name in pm-writer cpu-idiv mb-a mb-b mb-c mb-d; do
	ln -sf "$(command -v sky-work)" "/tmp/eval-bin/$name"
done

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
# threads, started PM, PM, compute, compute (a placement that ignores the
# classes puts the two writers on one core).
wl_smt() {
	pids=
	rm -f /tmp/eval-out.*
	for k in 1 2; do
		start pm-writer pm-write --file "/tmp/eval-pm-$k" --size-mb 64 --seconds "$secs"
		sleep 0.1
	done
	for k in 1 2; do
		start cpu-idiv compute --kind idiv --seconds "$secs"
		sleep 0.1
	done
	# shellcheck disable=SC2086
	wait $pids
	cat /tmp/eval-out.*
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
	for g in a b c d; do
		[ "$(printf '%s' "$pids" | wc -w)" -ge "$((EVAL_ARG + 2))" ] && break
		start "mb-$g" gang --threads 3 --mb 3 --seconds "$secs"
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

if ! type "wl_$scenario" >/dev/null 2>&1; then
	echo "eval.sh: no scenario $scenario"
	exit 2
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
		start_trace
		out=$("wl_$scenario" "$run" 2>&1)
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
