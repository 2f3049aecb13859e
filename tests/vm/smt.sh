# SMT pairing as the tracepoint observer sees it, for each scheduler of
# ${2:-"eevdf sky"} in one boot: 2 PM writers and 2 compute tasks per two
# cores, started in the worst order (pm, pm, cpu, cpu) and each restarted
# as a new process about every second for ${1:-10} s; the observer prints
# the share of PM-writer run time beside a compute sibling
# (`result observer=trace smt ...`). Meant for 1x2x2 (2 cores x 2 threads).
# scx_sky gets class hints for both kinds; it does not pair yet (issue 7),
# so this measures where it stands against EEVDF.
. ./lib.sh
secs=${1:-10}

# run_for KIND SECS: restart KIND every ~1 s until SECS have passed.
run_for() {
	end=$(($(date +%s) + $2))
	while [ "$(date +%s)" -lt "$end" ]; do
		if [ "$1" = pm ]; then
			sky-work pm-write --file /tmp/pm-$$-$RANDOM --size-mb 8 --seconds 1 >/dev/null
		else
			sky-work compute --kind idiv --seconds 1 >/dev/null
		fi
	done
}

smt_run() {
	start_trace
	run_for pm "$secs" & p1=$!
	sleep 0.2
	run_for pm "$secs" & p2=$!
	sleep 0.2
	run_for cpu "$secs" & c1=$!
	sleep 0.2
	run_for cpu "$secs" & c2=$!
	wait "$p1" "$p2" "$c1" "$c2"
	rm -f /tmp/pm-*
	stop_trace
}

for sched in ${2:-eevdf sky}; do
	echo "run scheduler=$sched"
	if [ "$sched" = eevdf ]; then
		smt_run
		continue
	fi
	start_sky --stats-interval 0 --class 'pm-writer=pm-writer' --class 'cpu-*=compute' || exit 1
	smt_run
	stop_sky
done
report_dmesg
