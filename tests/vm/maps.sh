# Full class and gang maps (scx_sky --max-classed 64 --max-ganged 8): 120
# threads hinted compute (burners name themselves burn) and 12
# memory-bound processes, each a gang of its own, overflow them. The
# scheduler is not ejected and runs on; the log says once that each map is
# full, and, when the load is gone and a smaller one comes (20 threads, 2
# gangs), that every entry is written again; those threads are classed
# and those gangs homed. Each load runs until what it is for was seen
# (the waits only guard against a hang: processes start slowly in TCG).
. ./lib.sh
named_work /tmp/maps cpu-burn mb-gang
start_sky --stats-interval 1 --max-classed 64 --max-ganged 8 \
	--class 'burn=compute' --class 'mb-*=memory-bound' || exit 1
# Spawning 120 threads beside the load takes a TCG guest seconds, and the
# daemon lists them once a second: the load runs until the log says both
# maps are full (at most 300 s in all, less if scx_sky exits), then stops.
/tmp/maps/cpu-burn burn --threads 120 --seconds 900 >/dev/null &
burn=$!
gangs=
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	/tmp/maps/mb-gang gang --threads 2 --mb 1 --seconds 900 >/dev/null &
	gangs="$gangs $!"
done
wait_line /tmp/sky.log 'sky_pid_class: .* not written (map full' "$SKY_PID" 3000 >/dev/null
full_class=$tenths
wait_line /tmp/sky.log 'sky_gang_homes: .* not written (map full' "$SKY_PID" \
	"$((3000 - full_class))" >/dev/null
echo "check full_after_tenths=$((full_class + tenths))"
echo "check state_when_full=$(state)"
# shellcheck disable=SC2086
kill -TERM "$burn" $gangs
# shellcheck disable=SC2086
wait "$burn" $gangs
sleep 1.5
/tmp/maps/cpu-burn burn --threads 20 --seconds 900 >/dev/null &
burn=$!
/tmp/maps/mb-gang gang --threads 2 --mb 1 --seconds 900 >/dev/null &
g1=$!
/tmp/maps/mb-gang gang --threads 2 --mb 1 --seconds 900 >/dev/null &
g2=$!
# Until a stats line counts the burners classed and a gang homed, and the
# log says each map has room again as often as it said it was full, at
# most 120 s.
tenths=0
while [ "$tenths" -lt 1200 ]; do
	sleep 0.5
	tenths=$((tenths + 5))
	line=$(grep 'stats: ' /tmp/sky.log | tail -1)
	compute=$(echo "$line" | sed -n 's/.*classes: compute=\([0-9]*\).*/\1/p')
	homed=$(echo "$line" | sed -n 's/.* gangs: homed=\([0-9]*\).*/\1/p')
	room=$(grep -c 'every entry written again' /tmp/sky.log)
	full=$(grep -c 'not written (map full' /tmp/sky.log)
	[ "${compute:-0}" -ge 20 ] && [ "${homed:-0}" -ge 1 ] && [ "$room" -ge "$full" ] && break
done
echo "check compute_after=$compute"
echo "check homed_after=$homed"
sky_query gangs | sed 's/^/gangs: /'
kill -TERM "$burn" "$g1" "$g2"
wait "$burn" "$g1" "$g2"
echo "check state_after=$(state)"
stop_sky
echo "check class_full_lines=$(grep -c 'sky_pid_class: .* not written (map full' /tmp/sky.log)"
echo "check class_room_lines=$(grep -c 'sky_pid_class: every entry written again' /tmp/sky.log)"
echo "check homes_full_lines=$(grep -c 'sky_gang_homes: .* not written (map full' /tmp/sky.log)"
echo "check homes_room_lines=$(grep -c 'sky_gang_homes: every entry written again' /tmp/sky.log)"
grep 'map full\|written again' /tmp/sky.log
report_dmesg
