# Short wakees beside hogs, as the tracepoint observer sees them, under
# EEVDF, `sky` and `sky-nolat` in turn in one boot: a hog on every CPU
# (started first, `lat-hog`) and two ping-pong pairs bouncing a byte over
# pipes (`lat-ping`), the pairs started anew as new processes ${1:-3}
# times, 2 s each, so every round trip wakes a task onto a busy machine.
# `sky` runs the sky1 policy; `sky-nolat` the same with the latency path
# off (--latency-burst-us 0): the ablation, in the same boot. The observer
# prints the ping-pong tasks' wake p99 (`result observer=trace placement
# group=pingpong ...`: each side names itself); the hogs print their work
# (`workload=burn`): their rate, over the rounds only: they run until the
# last round ends (a round takes 3-4 s of wall time under TCG, 2 s of it
# measured, so hogs timed to the rounds' 2 s left later rounds without
# them).
. ./lib.sh
rounds=${1:-3}

named_work /tmp/lat-bin lat-hog lat-ping

lat_run() {
	start_trace || return 1
	/tmp/lat-bin/lat-hog burn --threads "$(nproc)" --seconds 600 >/tmp/hog.out &
	hog=$!
	sleep 0.5
	i=0
	while [ "$i" -lt "$rounds" ]; do
		/tmp/lat-bin/lat-ping pingpong --pairs 2 --seconds 2
		i=$((i + 1))
	done
	kill -TERM "$hog"
	wait "$hog"
	cat /tmp/hog.out
	stop_trace
}

echo "run scheduler=eevdf"
lat_run
for sched in sky sky-nolat; do
	echo "run scheduler=$sched"
	off=
	[ "$sched" = sky-nolat ] && off="--latency-burst-us 0"
	# shellcheck disable=SC2086
	start_sky --stats-interval 0 $off || exit 1
	lat_run
	echo "check state_after_$sched=$(state)"
	stop_sky
done
report_dmesg
