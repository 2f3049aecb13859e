# Load, run a little work, unload: states, ops name, clean dmesg.
. ./lib.sh
echo "check state_before=$(state)"
start_sky --stats-interval 1 || exit 1
echo "check state_running=$(state)"
echo "check ops=$(cat /sys/kernel/sched_ext/root/ops)"
sky-work burn --threads "$(nproc)" --seconds 2
stop_sky
echo "check state_after=$(state)"
report_dmesg
