# Shared-cache gangs as the tracepoint observer sees them, for each
# scheduler of ${3:-"eevdf sky"} in one boot: ${2:-2} memory-bound gangs of
# 3 threads (`sky-work gang` through links named mb-a, mb-b, ...: the
# observer knows a gang by name) and 2 compute tasks, every one restarted
# as a new process about every 2 s, ${1:-5} processes in a row. Worst
# order: the compute tasks start first, one per domain, so each gang finds
# its domain partly taken. The observer prints `result observer=trace
# gangs ... all_share= dirty_share=`: the share of the time two or more of
# a gang's threads ran that all ran in one cache domain, and the share of
# domain time a domain ran two gangs at once.
#
# `sky` gets a class hint (`mb-*` is memory-bound), so BPF claims a home at
# a gang's first placement and the planner confirms it. Ablations, named in
# ${3}: `sky-nolat` (the latency path off, --latency-burst-us 0) and
# `sky-minrun` (latency preemption only of tasks that ran 20 ms). With "space" as
# the gang form (${4:-process}), each gang is two processes of one shared
# space instead (`scx_sky pvas run` joins them; a space's members are a gang
# by default): the same judgement.
. ./lib.sh
rounds=${1:-5}
gangs=${2:-2}
form=${4:-process}

named_work /tmp/gang-bin mb-a mb-b mb-c mb-d mb-e mb-f cpu-idiv

# gang_for NAME N: N gangs named NAME one after another, ~2 s each.
gang_for() {
	i=0
	while [ "$i" -lt "$2" ]; do
		if [ "$form" = space ]; then
			space="job-$1-$i"
			scx_sky pvas create "$space" --members 2 --segment-mb 2 >/dev/null || return 1
			scx_sky pvas run "$space" --id 1 -- "/tmp/gang-bin/$1" gang --threads 2 --mb 8 --seconds 2 >/dev/null &
			scx_sky pvas run "$space" --id 2 -- "/tmp/gang-bin/$1" gang --threads 1 --mb 8 --seconds 2 >/dev/null
			wait
			scx_sky pvas destroy "$space" >/dev/null 2>&1
		else
			"/tmp/gang-bin/$1" gang --threads 3 --mb 8 --seconds 2 >/dev/null
		fi
		i=$((i + 1))
	done
}

compute_for() {
	i=0
	while [ "$i" -lt "$1" ]; do
		/tmp/gang-bin/cpu-idiv compute --kind idiv --seconds 2 >/dev/null
		i=$((i + 1))
	done
}

gang_run() {
	start_trace
	pids=
	for n in 1 2; do
		compute_for "$rounds" &
		pids="$pids $!"
	done
	sleep 0.3
	for g in a b c d e f; do
		[ "$(printf '%s' "$pids" | wc -w)" -ge "$((gangs + 2))" ] && break
		gang_for "mb-$g" "$rounds" &
		pids="$pids $!"
		sleep 0.1
	done
	# shellcheck disable=SC2086
	wait $pids
	stop_trace
}

for sched in ${3:-eevdf sky}; do
	echo "run scheduler=$sched"
	case "$sched" in
	eevdf)
		gang_run
		continue
		;;
	sky)
		# (A space's members are one gang by default: no rule needed.)
		start_sky --stats-interval 0 --class 'mb-*=memory-bound' || exit 1
		;;
	sky-minrun)
		start_sky --stats-interval 0 --class 'mb-*=memory-bound' --latency-min-run-us 20000 || exit 1
		;;
	sky-nolat)
		# The ablation: the latency path off.
		start_sky --stats-interval 0 --class 'mb-*=memory-bound' --latency-burst-us 0 || exit 1
		;;
	esac
	# What scx_sky says of its gangs mid-run (`scx_sky gangs`).
	(sleep 4; sky_query gangs >/tmp/gangs.txt; echo "$?" >/tmp/gangs.rc) &
	gang_run
	sed 's/^/gangs: /' /tmp/gangs.txt
	echo "check gangs_cli_exit=$(cat /tmp/gangs.rc)"
	echo "check state_after_$sched=$(state)"
	scx_sky stats | sed 's/^/stats: /' | head -n 3
	stop_sky
done
report_dmesg
