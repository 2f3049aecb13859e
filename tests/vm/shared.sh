# Several scenarios in one boot (tests/scenario/boots.rs): arguments come
# in threes, TEST SCENARIO ARGS. Each scenario runs as its own script, as
# in a boot of its own, between `sky-vm: part TEST begin` and `sky-vm:
# part TEST end status=N` lines; then the guest is put back as a fresh
# boot left it: every process but this script's ancestors killed,
# sched_ext disabled, every CPU online, tracing off, /tmp, /dev/shm and
# the daemon's sockets emptied, the kernel log cleared (each scenario
# judges the kernel log it made).

# fresh_again: as a fresh boot left the guest.
fresh_again() {
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		case "$pid" in 1 | "$$" | "$PPID") continue ;; esac
		# Kernel threads have no command line.
		[ -s "$p/cmdline" ] && kill -9 "$pid" 2>/dev/null
	done
	tenths=0
	while [ "$(cat /sys/kernel/sched_ext/state)" != disabled ] && [ "$tenths" -lt 600 ]; do
		sleep 0.1
		tenths=$((tenths + 1))
	done
	for online in /sys/devices/system/cpu/cpu[0-9]*/online; do
		[ "$(cat "$online")" = 1 ] || echo 1 >"$online"
	done
	for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		[ -w "$t/tracing_on" ] || continue
		echo 0 >"$t/tracing_on"
		echo 0 >"$t/events/enable"
		: >"$t/trace"
	done
	rm -rf /tmp/* /dev/shm/* /run/scx_sky /var/run/scx
	dmesg -c >/dev/null
}

while [ "$#" -ge 3 ]; do
	test=$1
	scenario=$2
	args=$3
	shift 3
	echo "sky-vm: part $test begin uptime_s=$(cut -d' ' -f1 /proc/uptime)"
	# The arguments are shell words, as a scenario's command line takes
	# them; a part that hangs is stopped where a boot of its own would
	# have been (tests/scenario scenario_config), and the next one runs.
	eval "timeout 420 sh ./$scenario.sh $args"
	echo "sky-vm: part $test end status=$? uptime_s=$(cut -d' ' -f1 /proc/uptime)"
	fresh_again
done
