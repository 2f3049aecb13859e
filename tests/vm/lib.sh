# Shared helpers for the VM scenarios (busybox sh). Scenarios print
# `check key=value` lines; the host-side tests in tests/vm.rs judge them.

state() {
	cat /sys/kernel/sched_ext/state
}

# wait_state WANT: wait up to 30 s for sched_ext to reach WANT.
wait_state() {
	tries=0
	while [ "$(state)" != "$1" ]; do
		tries=$((tries + 1))
		if [ "$tries" -gt 300 ]; then
			echo "check timeout_waiting_for=$1 state=$(state)"
			return 1
		fi
		sleep 0.1
	done
}

# start_sky ARGS...: start scx_sky in the background, wait until enabled.
start_sky() {
	scx_sky "$@" >/tmp/sky.log 2>&1 &
	SKY_PID=$!
	if ! wait_state enabled; then
		cat /tmp/sky.log
		return 1
	fi
}

# stop_sky: SIGINT, wait for a clean exit, show its log.
stop_sky() {
	kill -INT "$SKY_PID"
	wait "$SKY_PID"
	rc=$?
	cat /tmp/sky.log
	echo "check sky_exit=$rc"
	wait_state disabled
}

# Kernel messages that mean a scheduler failed: a sched_ext disable for any
# reason but a clean unregister, watchdog stalls, BUGs, oopses, warnings.
# "stall" must start a word: "Installing" (9p, built into custom kernels)
# is no stall.
dmesg_errors() {
	dmesg | grep -E 'sched_ext|BUG:|Oops|WARNING:|(^|[^a-z])stall' |
		grep -vE 'enabled$|unregistered from user space|sched_ext: "' |
		grep -E 'disabled|error|BUG:|Oops|WARNING:|(^|[^a-z])stall'
}

report_dmesg() {
	dmesg | grep sched_ext
	dmesg_errors
	echo "check dmesg_errors=$(dmesg_errors | wc -l)"
}
