# How scx_sky's cost grows (a benchmark: it prints figures, the tests
# judge nothing here). Run at 1x2x2, 2x2x2 and 2x4x2 for 4, 8 and 16 CPUs.
#
# BPF: a pipe wakeup storm (one ping-pong pair per CPU) under EEVDF, then
# under sky1 for its round trips, then under sky1 beside the kernel's BPF
# statistics for what each callback costs (sky-work bpf-cost).
#
# The daemon (on the first topology only, or when $1 is "daemon"): its
# threads' share of one CPU (sky-work daemon-cpu, from the kernel's
# schedstat) beside 1 000 and then 10 000 idle threads, in three setups:
# plain (no hint, no space: nothing to list), space (a shared space whose
# member 1 writes a persistent queue to member 2, both then waiting), and
# hint (a class hint only the daemon can apply: every thread listed every
# 100 ms, as far as the scan budget lets it), and pmu (--pmu software:
# counters read and every thread listed every 100 ms, as with a hardware
# PMU).
. ./lib.sh
secs=${COST_SECONDS:-8}
cpus=$(nproc)

storm() {
	sky-work pingpong --pairs "$cpus" --seconds "$secs" | sed "s/^result /result sched=$1 cpus=$cpus /"
}

echo "run storm"
storm eevdf
start_sky --stats-interval 0 || exit 1
storm sky1
sky-work pingpong --pairs "$cpus" --seconds "$secs" >/dev/null &
storm_pid=$!
sky-work bpf-cost --seconds "$secs" | sed "s/^result /result sched=sky1 cpus=$cpus /"
wait "$storm_pid"
echo "check state_after_storm=$(state)"
stop_sky

[ "$cpus" -le 4 ] || [ "${1:-}" = daemon ] || exit 0

# space_up / space_down: the space of the "space" setup, with its
# writer blocked on a full queue and its reader holding.
space_up() {
	scx_sky pvas create cost --members 2 --segment-mb 2 >/dev/null || return 1
	scx_sky pvas run cost --id 2 -- sky-pvas-peer - 2 queue-hold-recv push 1 0 64 16 >/tmp/cost-recv.out &
	members=$!
	sleep 1
	scx_sky pvas run cost --id 1 -- sky-pvas-peer - 1 queue-send push 2 1000000 64 16 >/tmp/cost-send.out &
	members="$members $!"
	sleep 1
	scx_sky pvas ls | sed 's/^/space: /'
}
space_down() {
	scx_sky pvas destroy cost --kill >/dev/null 2>&1
	# shellcheck disable=SC2086
	wait $members 2>/dev/null
}

for n in 1000 10000; do
	sky-work idle-threads --count "$n" --seconds 600 >/dev/null &
	idle=$!
	tenths=0
	while [ "$tenths" -lt 600 ] && [ "$(ls /proc/"$idle"/task 2>/dev/null | wc -l)" -lt "$n" ]; do
		sleep 0.5
		tenths=$((tenths + 5))
	done
	for setup in plain space hint pmu; do
		echo "run daemon threads=$n setup=$setup"
		case $setup in
		plain) start_sky --stats-interval 0 || exit 1 ;;
		space)
			start_sky --stats-interval 0 || exit 1
			space_up || echo "check space_failed=1"
			;;
		hint) start_sky --stats-interval 0 --class 'c?x=compute' || exit 1 ;;
		pmu) start_sky --stats-interval 0 --pmu software || exit 1 ;;
		esac
		sleep 3
		sky-work daemon-cpu --pid "$SKY_PID" --seconds "$secs" |
			sed "s/^result /result threads=$n setup=$setup /"
		[ "$setup" = space ] && grep -i "classes:\|gang" /tmp/sky.log | tail -3
		stop_sky
		[ "$setup" = space ] && space_down
	done
	kill "$idle"
	wait "$idle" 2>/dev/null
done
report_dmesg
