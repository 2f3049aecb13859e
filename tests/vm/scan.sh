# The daemon answers while it has much to scan. 10 000 idle threads run
# throughout. First scx_sky with nothing to scan (no hint, no space): the
# baseline. Then with 10 000 registry entries of spaces long gone and a
# cgroup hint only the daemon applies (every thread listed with its
# cgroup as often as the daemon's scan budget allows). Each time a
# client's statistics requests (sky-work stats-latency: 40, 50 ms apart,
# on one connection) and SIGTERM (sky-work term-latency: until the daemon
# detached, until sched_ext is disabled, until scx_sky has exited) are
# timed.
. ./lib.sh
sky-work idle-threads --count 10000 --seconds 120 &
idle=$!
# Until the threads are all there (they start slowly under TCG), at most
# 30 s.
tenths=0
while [ "$tenths" -lt 300 ] && [ "$(ls /proc/"$idle"/task 2>/dev/null | wc -l)" -lt 10000 ]; do
	sleep 0.5
	tenths=$((tenths + 5))
done
echo "check idle_threads=$(ls /proc/"$idle"/task | wc -l)"

for run in baseline scanning; do
	echo "run $run"
	if [ "$run" = scanning ]; then
		sky-work fill-registry --entries 10000
		start_sky --stats-interval 1 --class 'cgroup:/nosuch*=compute' || exit 1
	else
		start_sky --stats-interval 1 || exit 1
	fi
	sleep 3
	sky-work stats-latency --requests 40 --every-ms 50 | sed "s/^result /result run=$run /"
	echo "check state_before_term_$run=$(state)"
	sky-work term-latency --pid "$SKY_PID" | sed "s/^result /result run=$run /"
	wait "$SKY_PID"
	echo "check sky_exit_$run=$?"
	grep 'registry\|stats total' /tmp/sky.log
	wait_state disabled
done
kill "$idle"
wait "$idle"
report_dmesg
