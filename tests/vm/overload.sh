# Overload, survived and measured, under each scheduler of ${4:-"eevdf sky"}
# in one boot. First ${3:-20} s of churn: sky-work hostile (nice, class,
# affinity and yield churn, a fork storm) while CPUs 1 and 3 go offline
# and come back. Then ${1:-2000} sleepers (sky-work sleepers: 20 us of
# work and a 5 us sleep, in a loop: far more runnable threads than the
# 4 CPUs serve within a wait bound) for ${2:-20} s, as two processes, the
# second joining half way (both made at once, parked, each released all
# together: made under the load, making them would take minutes and be
# most of what is measured). The sleepers are their own observer, the same
# under every scheduler: loops done, the least and the median thread's,
# and the longest any thread went between two loops (a wait bound that
# fails shows there). (The tracepoint observer is left out: its reader,
# one more task among thousands, parsed millions of events a second and
# fell behind, or, made real-time, took a CPU from the load it judged.)
# The watchdog (SCX_TIMEOUT_MS, lib.sh) ejects scx_sky if any task stalls
# that long; scx_sky's stats are printed too.
. ./lib.sh
threads=${1:-2000}
secs=${2:-20}
churn=${3:-20}

churn_run() {
	sky-work hostile --seconds "$churn" --pinned 6 --pin-cpu 2 >/tmp/hostile.out 2>&1 &
	load=$!
	cycle_cpus "$((churn - 2))" 1 3
	wait "$load"
	echo "check churn_exit=$?"
}

overload_run() {
	churn_run
	began=$(date +%s)
	half=$((threads / 2))
	sky-work sleepers --threads "$half" --seconds "$secs" \
		--release-on-sigusr1 >/tmp/sleepers-1.out 2>&1 &
	first=$!
	sky-work sleepers --threads "$((threads - half))" --seconds "$((secs / 2))" \
		--release-on-sigusr1 >/tmp/sleepers-2.out 2>&1 &
	second=$!
	wait_line /tmp/sleepers-1.out 'sleepers: parked' "$first" 3000 >/dev/null
	wait_line /tmp/sleepers-2.out 'sleepers: parked' "$second" 3000 >/dev/null
	kill -USR1 "$first"
	sleep "$((secs / 2))"
	kill -USR1 "$second"
	wait "$first"
	echo "check first_sleepers_exit=$?"
	wait "$second"
	echo "check second_sleepers_exit=$?"
	cat /tmp/sleepers-1.out /tmp/sleepers-2.out
	# Wall time of the sleepers phase: making (parked), measuring and
	# joining the threads (under the load they make).
	echo "check sleepers_phase_${sched}_s=$(($(date +%s) - began))"
}

for sched in ${4:-eevdf sky}; do
	echo "run scheduler=$sched"
	if [ "$sched" = eevdf ]; then
		overload_run
		continue
	fi
	start_sky --stats-interval 0 || exit 1
	overload_run
	echo "check state_after_$sched=$(state)"
	scx_sky stats | sed 's/^/stats: /' | head -n 3
	stop_sky
done
report_dmesg
