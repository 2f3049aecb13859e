# The hostile load (sky-work hostile) for ${1:-30} s while CPUs go offline
# and come back, under each scheduler of ${2:-sky} in turn ("eevdf sky"
# compares in one boot): the watchdog (SCX_TIMEOUT_MS, lib.sh) ejects
# scx_sky if any task stalls for 3 s; every thread reports its longest
# run-queue wait from the kernel's counters, and the tracepoint observer
# (lib.sh start_trace) sees every single wait of every task.
. ./lib.sh
secs=${1:-30}

hostile_run() {
	start_trace
	sky-work hostile --seconds "$secs" --pinned 6 --pin-cpu 2 &
	load=$!
	cycle_cpus "$((secs - 2))" 3 5 6
	wait "$load"
	echo "check load_exit=$?"
	stop_trace
}

for sched in ${2:-sky}; do
	echo "run scheduler=$sched"
	if [ "$sched" = eevdf ]; then
		hostile_run
		continue
	fi
	start_sky --stats-interval 5 || exit 1
	hostile_run
	scx_events
	echo "check state_after_hostile=$(state)"
	stop_sky
done
report_dmesg
