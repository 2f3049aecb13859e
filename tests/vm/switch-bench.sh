# Switch latency, a benchmark, not a test: how long a policy switch takes
# to reach the scheduler's decisions, under load, two ways in one boot:
#   live     `policy set` through scx_sky's control socket, ${1:-1000}
#            switches one at a time
#   restart  stop scx_sky and start it again with the next policy, as
#            scx_loader and `systemctl restart scx` do, ${2:-100} times
# Both are timed from just before the request (or the SIGINT) to the first
# BPF callback that pinned the new policy (scx_sky stamps it; `policy get`
# shows it as first_use_ns), on CLOCK_MONOTONIC. For restarts, the time
# /sys/kernel/sched_ext/state is not `enabled` (tasks on the fair class)
# is reported too, to about the 0.2 ms the watcher sleeps between looks.
# The load is a wakeup storm (two ping-pong pairs) and one compute task, so
# BPF decides many times a millisecond whatever the policy, while a
# loading scheduler still gets a CPU (a compute task on every CPU makes a
# load take half a minute under emulation).
#
# TCG runs every vCPU on one host thread, so absolute times are the
# emulator's; the live/restart ratio is what carries over. In the VM a
# restart takes 11-21 s, so 100 of them need `cargo xtask vm --timeout
# 3000`. Natively, as root, with nothing else on sched_ext:
#   cd tests/vm && sudo env PATH="$PWD/../../target/release:$PATH" sh ./switch-bench.sh 1000 1000
. ./lib.sh
switches=${1:-1000}
restarts=${2:-100}
long=3600

sky-work compute --kind idiv --seconds "$long" >/dev/null &
load=$!
sky-work pingpong --pairs 2 --seconds "$long" >/dev/null &
load="$load $!"

start_sky --stats-interval 0 || exit 1
sky-work switch-latency --switches "$switches" | tee /tmp/live.out
stop_sky >/dev/null
wait_state disabled

sky-work restart-latency --restarts "$restarts" -- scx_sky --stats-interval 0 \
	2>/tmp/restart.log | tee /tmp/restart.out
grep -q '^result' /tmp/restart.out || tail -20 /tmp/restart.log
wait_state disabled

# shellcheck disable=SC2086
kill $load 2>/dev/null
# field FILE NAME: NAME=VALUE out of a result line.
field() {
	tr ' ' '\n' <"$1" | sed -n "s/^$2=//p" | head -1
}
ms() {
	awk -v us="$1" 'BEGIN { printf "%.2f", us / 1000 }'
}
echo
echo "switch latency, request to first BPF decision under the new policy (ms)"
printf '%-8s %8s %8s %8s %8s %12s\n' how switches p50 p99 max outside_p99
for how in live restart; do
	f=/tmp/$how.out
	outside=-
	[ "$how" = restart ] && outside=$(ms "$(field $f outside_p99_us)")
	printf '%-8s %8s %8s %8s %8s %12s\n' "$how" "$(field $f switches)" \
		"$(ms "$(field $f reach_p50_us)")" "$(ms "$(field $f reach_p99_us)")" \
		"$(ms "$(field $f reach_max_us)")" "$outside"
done
live50=$(field /tmp/live.out reach_p50_us)
restart50=$(field /tmp/restart.out reach_p50_us)
echo "check restart_over_live_p50=$(awk -v a="$restart50" -v b="$live50" \
	'BEGIN { printf "%.0f", (b > 0 ? a / b : 0) }')"
report_dmesg
