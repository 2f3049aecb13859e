# CPUs go offline and come back while every CPU is busy.
. ./lib.sh
start_sky --stats-interval 1 || exit 1
# Until the CPUs are back (SIGTERM: it prints what it did).
sky-work burn --threads "$(nproc)" --seconds 900 &
burner=$!
for cpu in 3 5; do
	sleep 1
	echo 0 >/sys/devices/system/cpu/cpu$cpu/online
	echo "check offline_cpu$cpu=$(cat /sys/devices/system/cpu/cpu$cpu/online) state=$(state)"
	sleep 1
	echo 1 >/sys/devices/system/cpu/cpu$cpu/online
	echo "check online_cpu$cpu=$(cat /sys/devices/system/cpu/cpu$cpu/online) state=$(state)"
done
kill -TERM "$burner"
wait "$burner"
echo "check state_after_hotplug=$(state)"
stop_sky
report_dmesg
