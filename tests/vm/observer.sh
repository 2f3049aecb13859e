# The tracepoint observer against the kernel's own counters (tests/eval.rs):
# `sky-work observer-check` runs tasks that burst, sleep, yield and hop
# CPUs, then block; it prints each one's /proc/PID/sched and schedstat
# counts while the observer (`sky-work trace-waits --tasks obs-check`)
# still traces, so both saw the same whole lives. Under EEVDF, then under
# scx_sky, in one boot. Lines are tagged with sched=.
. ./lib.sh

# observe SCHED: one run, its kernel and observer lines tagged.
observe() {
	start_trace --tasks obs-check || return 1
	rm -f /tmp/obs.release
	# Emptied first: the last run's `ready` must not count for this one.
	: >/tmp/obs.out
	sky-work observer-check --procs 6 --seconds 3 --hold /tmp/obs.release >/tmp/obs.out 2>&1 &
	obs=$!
	if ! wait_line /tmp/obs.out 'obs-check ready' "$obs" 900; then
		kill -INT "$TRACE_PID"
		wait "$TRACE_PID"
		return 1
	fi
	# Not in a pipe: stop_trace must wait for its own child.
	stop_trace >/tmp/stop-trace.out
	sed "s/^result /result sched=$1 /" /tmp/stop-trace.out
	touch /tmp/obs.release
	wait "$obs"
	echo "check obs_exit_$1=$?"
	sed "s/^result /result sched=$1 /" /tmp/obs.out
}

observe eevdf || exit 1
start_sky -p sky1 --stats-interval 0 || exit 1
observe sky1 || exit 1
stop_sky
report_dmesg
