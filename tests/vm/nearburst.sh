# A hostile near-burst task beside hogs, as the tracepoint observer sees
# it, under EEVDF and then scx_sky (sky1: the latency path on) in one
# boot: one thread (`sleeper`, `sky-work sleepers`) computes 450 us, just
# under sky1's latency_burst_us (500), and sleeps 10 us, in a loop, while
# three hogs (`burn`, `sky-work burn`) run; all four are pinned to CPU 0,
# so each one's fair share of it is a quarter. A task the latency path took for short
# would sort ahead of the hogs and preempt them. The observer prints each
# group's CPU time (`placement ... run_ms=`) and longest wait; the watchdog
# ejects a scheduler that leaves a task waiting SCX_TIMEOUT_MS (3000).
# ${1:-8}: seconds per scheduler; ${2:-"eevdf sky"}: which of the two.
. ./lib.sh
secs=${1:-8}

nb_run() {
	start_trace || return 1
	taskset -c 0 sky-work burn --threads 3 --seconds "$secs" >/tmp/nb-hog.out &
	hog=$!
	taskset -c 0 sky-work sleepers --threads 1 --work-us 450 --sleep-us 10 \
		--seconds "$secs" >/tmp/nb-near.out &
	near=$!
	wait "$hog"
	wait "$near"
	cat /tmp/nb-hog.out /tmp/nb-near.out
	stop_trace
}

for sched in ${2:-eevdf sky}; do
	echo "run scheduler=$sched"
	if [ "$sched" = eevdf ]; then
		nb_run
		continue
	fi
	start_sky --stats-interval 0 || exit 1
	nb_run
	echo "check state_after_sky=$(state)"
	stop_sky
done
report_dmesg
