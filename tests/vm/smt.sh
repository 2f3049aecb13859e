# SMT pairing as the tracepoint observer sees it, for each scheduler of
# ${2:-"eevdf sky sky-nohints"} in one boot: as many PM writers as compute
# tasks, one task per CPU, started in the worst order (every PM writer
# first, then the compute tasks) and each restarted as a new process about
# every second, ${1:-10} processes in a row; the observer prints the share
# of PM-writer run time beside a compute sibling (`result observer=trace
# smt ...`). `sky` gets class hints for both kinds and pairs them;
# `sky-nohints` runs the same load with no hints (and no PMU in the VM):
# pairing must stay out of the way and SKY-1 stay healthy (over ${3:-$1}
# processes in a row: what it checks holds from the first).
#
# The workloads are started through links named like them, so a process
# has its name from exec on (no unnamed start-up beside a PM writer), and
# the loops use shell builtins only: the restart machinery should be as
# small a part of what runs beside PM writers as it can be.
. ./lib.sh
rounds=${1:-10}
nohints_rounds=${3:-$rounds}
each=$(($(nproc) / 2))

named_work /tmp/smt-bin pm-writer cpu-idiv

# run_for KIND N: N processes of KIND one after another, ~1 s each.
run_for() {
	i=0
	while [ "$i" -lt "$2" ]; do
		if [ "$1" = pm ]; then
			/tmp/smt-bin/pm-writer pm-write --file "/tmp/pm-$$-$i" --size-mb 8 --seconds 1 >/dev/null
			rm -f "/tmp/pm-$$-$i"
		else
			/tmp/smt-bin/cpu-idiv compute --kind idiv --seconds 1 >/dev/null
		fi
		i=$((i + 1))
	done
}

smt_run() {
	start_trace
	pids=
	for kind in pm cpu; do
		n=0
		while [ "$n" -lt "$each" ]; do
			run_for "$kind" "$rounds" &
			pids="$pids $!"
			sleep 0.2
			n=$((n + 1))
		done
	done
	# shellcheck disable=SC2086
	wait $pids
	stop_trace
}

for sched in ${2:-eevdf sky sky-nohints}; do
	echo "run scheduler=$sched"
	case "$sched" in
	eevdf)
		smt_run
		continue
		;;
	sky)
		start_sky --stats-interval 0 --class 'pm-writer=pm-writer' --class 'cpu-*=compute' || exit 1
		;;
	sky-nohints)
		start_sky --stats-interval 0 || exit 1
		rounds=$nohints_rounds
		;;
	esac
	smt_run
	echo "check state_after_$sched=$(state)"
	stop_sky
done
report_dmesg
