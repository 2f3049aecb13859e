# Partners (bpf/partners.bpf.h): two members of one shared space ping-pong
# messages (`sky-pvas-bench --eval`: one-copy and ring messages, then the
# persistent queue; the members spin, yield and sleep on a futex while
# they wait for each other) on an otherwise idle machine, under EEVDF,
# `sky` (sky1) and `sky-nogangs` (sky1 --gangs false: partners off, the
# ablation) in turn in one boot, each run ${1:-2} times as new processes
# (the ablation ${3:-$1} times: its figure is that the rule never fires),
# with the tracepoint observer: its `partners group=sky-pvas-bench` line
# says how long a member waited on the CPU where the other ran while
# another CPU idled. The space lives on tmpfs: placement is judged here,
# not persistence (pvas-dax.sh, pvas-pmem.sh).
. ./lib.sh
runs=${1:-2}
scheds=${2:-eevdf sky sky-nogangs}
nogangs_runs=${3:-$runs}

pair_run() {
	start_trace || return 1
	i=0
	while [ "$i" -lt "$runs" ]; do
		rm -rf /tmp/partners-space
		mkdir -p /tmp/partners-space
		sky-pvas-bench --eval /tmp/partners-space || echo "check bench_failed=1"
		i=$((i + 1))
	done
	stop_trace
}

for sched in $scheds; do
	echo "run scheduler=$sched"
	case $sched in
	eevdf)
		pair_run
		continue
		;;
	sky) start_sky --stats-interval 0 || exit 1 ;;
	sky-nogangs)
		start_sky --stats-interval 0 --gangs false || exit 1
		runs=$nogangs_runs
		;;
	esac
	pair_run
	echo "check state_after_$sched=$(state)"
	stop_sky
done
report_dmesg
