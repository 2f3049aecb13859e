# The hostile load (sky-work hostile) for ${1:-30} s under scx_sky while
# CPUs go offline and come back: the watchdog (SCX_TIMEOUT_MS, lib.sh)
# ejects the scheduler if any task stalls for 3 s, and every thread
# reports its longest run-queue wait from the kernel's counters.
. ./lib.sh
secs=${1:-30}
start_sky --stats-interval 5 || exit 1
sky-work hostile --seconds "$secs" --pinned 6 --pin-cpu 2 &
load=$!
end=$(($(date +%s) + secs - 2))
while [ "$(date +%s)" -lt "$end" ]; do
	for cpu in 3 5 6; do
		echo 0 >/sys/devices/system/cpu/cpu$cpu/online
		sleep 0.5
		echo 1 >/sys/devices/system/cpu/cpu$cpu/online
		sleep 0.5
	done
done
wait "$load"
echo "check load_exit=$?"
echo "check state_after_hostile=$(state)"
stop_sky
report_dmesg
