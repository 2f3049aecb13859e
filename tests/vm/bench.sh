# The scheduler benchmark, driven by `cargo xtask bench` (xtask/src/bench):
# in each cell the SKY-1 workload runs under EEVDF first, then under each
# scx_sky variant; then the wakeup storm the same way. All in one boot, so
# every scheduler meets the same guest. Figures come from kernel counters.
#
#   BENCH_SECONDS    seconds per run
#   BENCH_BURST_US   compute burst of the SKY-1 workload, µs
#   BENCH_STORM      1: also run the ping-pong storm, one pair per CPU
#   BENCH_VARIANTS   how many scx_sky variants; BENCH_VARIANT_<i> holds the
#                    scx_sky arguments of variant i
#   arguments        the cells, as SLEEP_US:ARRAY_KB:TASKS_PER_CPU
#
# Prints one `result cell=... sched=eevdf|variant<i> ...` line per run. A
# scx_sky run also carries sky_exit=, state= (sched_ext's state when the
# workload ended) and errors= (kernel error lines the run added), so a
# scheduler that was ejected mid-run never passes for a result, and
# watchdog_ms= (the stall timeout scx_sky reports having set).
. ./lib.sh

secs=${BENCH_SECONDS:-5}
burst=${BENCH_BURST_US:-2000}
variants=${BENCH_VARIANTS:-0}
cpus=$(nproc)
echo "bench-header date=$(date -u +%Y-%m-%d) kernel=$(uname -r) cpus=$cpus seconds=$secs"

# tag CELL SCHED [FIELDS]: puts the run's identity on sky-work's result line.
tag() {
	sed "s/^result /result cell=$1 sched=$2 $3/"
}

# workload CELL: runs the cell's workload; its result line on stdout.
workload() {
	if [ "$1" = storm ]; then
		sky-work pingpong --pairs "$cpus" --seconds "$secs"
		return
	fi
	local sleep_us=${1%%:*}
	local rest=${1#*:}
	local array_kb=${rest%%:*}
	local per_cpu=${rest#*:}
	sky-work cache-loop --procs $((per_cpu * cpus)) --array-kb "$array_kb" \
		--burst-us "$burst" --sleep-us "$sleep_us" --seconds "$secs"
}

run_eevdf() {
	echo "bench-run cell=$1 sched=eevdf"
	local out
	out=$(workload "$1")
	if echo "$out" | grep -q '^result '; then
		echo "$out" | tag "$1" eevdf
	else
		echo "$out"
		echo "result cell=$1 sched=eevdf failed=workload"
	fi
}

# run_sky CELL I: the cell's workload under variant I. A variant that fails
# to start is not retried in later cells.
run_sky() {
	local cell=$1 i=$2 args out st rc errors before wd
	echo "bench-run cell=$cell sched=variant$i"
	if [ -n "$(eval echo "\$broken_$i")" ]; then
		echo "result cell=$cell sched=variant$i failed=start"
		return
	fi
	eval "args=\$BENCH_VARIANT_$i"
	before=$(dmesg_errors | wc -l)
	# The variant is word-split into arguments on purpose.
	# shellcheck disable=SC2086
	if ! start_sky $args --stats-interval 0; then
		eval "broken_$i=1"
		echo "result cell=$cell sched=variant$i failed=start"
		return
	fi
	out=$(workload "$cell")
	st=$(state)
	# scx_utils logs the timeout it took from SCX_TIMEOUT_MS.
	wd=$(sed -n 's/.*timeout_ms to \([0-9]*\).*/\1/p' /tmp/sky.log | head -n 1)
	kill -INT "$SKY_PID"
	wait "$SKY_PID"
	rc=$?
	[ "$rc" = 0 ] || cat /tmp/sky.log
	# scx_sky's own view of the run, for reading beside the kernel's.
	sed -n "s/.*stats total: /sky-stats cell=$cell sched=variant$i /p" /tmp/sky.log
	wait_state disabled
	errors=$(($(dmesg_errors | wc -l) - before))
	[ "$errors" -gt 0 ] && dmesg_errors | tail -n "$errors"
	if echo "$out" | grep -q '^result '; then
		echo "$out" | tag "$cell" "variant$i" "sky_exit=$rc state=$st errors=$errors watchdog_ms=${wd:-unconfirmed} "
	else
		echo "$out"
		echo "result cell=$cell sched=variant$i failed=workload"
	fi
}

storm=
[ "${BENCH_STORM:-0}" = 1 ] && storm=storm
for cell in "$@" $storm; do
	run_eevdf "$cell"
	i=0
	while [ "$i" -lt "$variants" ]; do
		run_sky "$cell" "$i"
		i=$((i + 1))
	done
done
echo "check dmesg_errors=$(dmesg_errors | wc -l)"
