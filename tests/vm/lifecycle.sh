# The scheduler's life: load, states and ops name; the daemon killed with
# SIGKILL (the kernel must fall back cleanly) and a new one attaching; and
# the restart path: a CPU offline at start-up comes online in a cache
# domain BPF never saw, so BPF asks for a reload and the daemon does it.
. ./lib.sh
echo "check state_before=$(state)"
start_sky --stats-interval 1 || exit 1
echo "check state_running=$(state)"
echo "check ops=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null || cat /sys/kernel/sched_ext/ops)"
# A second instance refuses before it sets anything up, naming the running
# scheduler, and leaves the first its control socket.
scx_sky --stats-interval 0 >/tmp/second.log 2>&1
echo "check second_exit=$?"
echo "check second_named_ops=$(grep -c 'another sched_ext scheduler is running: sky_' /tmp/second.log)"
echo "check first_still_controlled=$(scx_sky policy get >/dev/null 2>&1 && echo yes || echo no)"
sky-work burn --threads "$(nproc)" --seconds 1

kill -KILL "$SKY_PID"
wait "$SKY_PID"
wait_state disabled
echo "check state_after_sigkill=$(state)"
sky-work burn --threads 2 --seconds 1 >/dev/null
# --monitor started with no scheduler up waits for one, and follows it
# through a stop and a new start (as the scx schedulers' monitors do).
# Each step waits for what the monitor prints, however long a process
# takes to start here.
scx_sky --monitor 1 >/tmp/monitor.out 2>&1 &
MONITOR_PID=$!
wait_line /tmp/monitor.out 'waiting for scx_sky' "$MONITOR_PID" 600 >/dev/null
start_sky --stats-interval 0 || exit 1
echo "check state_reattached=$(state)"
wait_line /tmp/monitor.out '^policy=' "$MONITOR_PID" 600 >/dev/null
stop_sky >/dev/null
echo "check state_after=$(state)"
# What the daemon made goes with it.
echo "check control_left=$(ls -A /run/scx_sky 2>/dev/null | wc -l) stats_left=$(test -e /var/run/scx/root/stats && echo 1 || echo 0)"

echo 0 >/sys/devices/system/cpu/cpu3/online
start_sky --stats-interval 0 || exit 1
echo 1 >/sys/devices/system/cpu/cpu3/online
wait_reload
sky-work burn --threads "$(nproc)" --seconds 1 >/dev/null
echo "check state_after_restart=$(state) cpu3_online=$(cat /sys/devices/system/cpu/cpu3/online)"
echo "check attaches=$(grep -c 'scx_sky attached' /tmp/sky.log)"
tenths=0
until sed -n '/again/,$p' /tmp/monitor.out | grep -q '^policy=' || [ "$tenths" -ge 600 ]; do
	sleep 0.1
	tenths=$((tenths + 1))
done
echo "check monitor_alive=$(alive "$MONITOR_PID" && echo yes || echo no)"
kill "$MONITOR_PID"
echo "check monitor_waits=$(grep -c 'waiting for scx_sky' /tmp/monitor.out)"
echo "check monitor_lines_first=$(sed -n '1,/again/p' /tmp/monitor.out | grep -c '^policy=')"
echo "check monitor_lines_again=$(sed -n '/again/,$p' /tmp/monitor.out | grep -c '^policy=')"
sed 's/^/monitor: /' /tmp/monitor.out | head -4
stop_sky
echo "check disable_reasons=$(disable_reasons)"
report_dmesg 'unregistered from BPF|came online in an unknown cache domain'
