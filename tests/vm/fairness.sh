# Weights and presets: two spinners of nice 0 and nice 5 pinned to one
# CPU must share it by their weights, and a spinner that renices itself
# every millisecond must not keep the CPU from its neighbour; then each
# preset runs the SKY-1 workload healthily. Figures come from the
# kernel's counters.
. ./lib.sh
start_sky --stats-interval 0 || exit 1
sky-work share --nices 0,5 --cpu 1 --seconds 4
# Two nice 0 spinners on one CPU, then the same with the first renicing
# itself (0, 1, 0, ...) every millisecond: each renice makes the kernel
# restart it without a slice end, which must not hand it a fresh slice.
sky-work share --nices 0,0 --cpu 1 --seconds 3 | sed 's/^result /result pair=plain /'
sky-work share --nices 0,0 --cpu 1 --seconds 3 --renice-first-every-ms 1 |
	sed 's/^result /result pair=reniced /'
stop_sky >/dev/null
for policy in sky1 sky1-strict vtime; do
	start_sky --policy "$policy" --stats-interval 0 || exit 1
	sky-work cache-loop --procs 6 --seconds 3 | sed "s/^result /result policy=$policy /"
	echo "check state_after_$policy=$(state)"
	stop_sky | grep 'stats total'
done
report_dmesg
