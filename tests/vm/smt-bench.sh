# Seed 000's comparison (docs/seeds.md) in one boot, a benchmark, not a test:
# two PM writers and two integer-division compute tasks on 2 cores x 2
# threads, ${1:-10} s per placement:
#   smt-cross     pinned by hand: each core runs a PM writer and a compute task
#   smt-parallel  pinned by hand: both PM writers on one core, both compute
#                 tasks on the other
#   nosmt-2t      pinned by hand to one thread per core: a PM writer and a
#                 compute task time-share each core (SMT unused)
#   eevdf         the kernel's scheduler, tasks started pm, pm, cpu, cpu
#   sky           scx_sky with pairing (class hints), same start order
# Prints, for each, PM writes/s and compute rounds/s summed over the two
# tasks of a kind, each as a ratio to EEVDF's in this boot, and the share
# of PM-writer time beside a compute sibling from the tracepoint observer.
#
# TCG runs one vCPU at a time and models no SMT contention: a thread's
# speed does not depend on what its sibling runs, so in the VM only the
# placement column means anything (the work ratios show the cost of
# time-sharing, nothing of SMT). On a machine with SMT and persistent
# memory, run the same script natively, as root, with the PM file on DAX:
#   SMT_BENCH_FILE=/mnt/pmem/smt-bench sh tests/vm/smt-bench.sh 30
# (PATH must hold target/release for sky-work and scx_sky).
. ./lib.sh
secs=${1:-10}
file=${SMT_BENCH_FILE:-/tmp/smt-bench-pm}
out=/tmp/smt-bench-out
mkdir -p "$out"

# The two cores: their thread pairs from sysfs, e.g. "0 2" and "1 3".
cores=$(for c in /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list; do
	cat "$c"
done | sort -u | tr ',-' '  ' | head -2)
set -- $(echo "$cores" | tr '\n' ' ')
if [ "$#" -ne 4 ]; then
	echo "check smt_bench_needs=2 cores x 2 threads, found: $cores"
	exit 1
fi
a0=$1 a1=$2 b0=$3 b1=$4

# run_one NAME PM1 PM2 CPU1 CPU2: the four tasks, pinned to the given CPUs
# ("-" for none), started pm, pm, cpu, cpu; prints the summed rates.
run_one() {
	start_trace
	i=0
	pids=
	for spec in "pm $2" "pm $3" "cpu $4" "cpu $5"; do
		set -- $spec
		pin=
		[ "$2" != - ] && pin="taskset -c $2"
		if [ "$1" = pm ]; then
			$pin sky-work pm-write --file "$file-$i" --size-mb 64 --seconds "$secs" >$out/$i &
		else
			$pin sky-work compute --kind idiv --seconds "$secs" >$out/$i &
		fi
		pids="$pids $!"
		i=$((i + 1))
		sleep 0.2
	done
	# shellcheck disable=SC2086
	wait $pids
	stop_trace >$out/trace
	rm -f "$file"-*
	writes=$(cat $out/0 $out/1 | sed -n 's/.*writes_per_s=\([0-9.]*\).*/\1/p' |
		awk '{s += $1} END {printf "%.0f", s}')
	rounds=$(cat $out/2 $out/3 | sed -n 's/.*rounds_per_s=\([0-9.]*\).*/\1/p' |
		awk '{s += $1} END {printf "%.1f", s}')
	beside=$(sed -n 's/.*smt pm_writer_ms.* beside_compute=\([0-9.]*\).*/\1/p' $out/trace)
	echo "result smt-bench placement=$NAME writes_per_s=$writes rounds_per_s=$rounds beside_compute=${beside:-?}"
}

echo "smt-bench date=$(date -u +%Y-%m-%d) kernel=$(uname -r) seconds=$secs cores=$a0,$a1/$b0,$b1"
NAME=eevdf run_one x - - - - | tee $out/results
NAME=smt-cross run_one x "$a0" "$b0" "$a1" "$b1" | tee -a $out/results
NAME=smt-parallel run_one x "$a0" "$a1" "$b0" "$b1" | tee -a $out/results
NAME=nosmt-2t run_one x "$a0" "$b0" "$a0" "$b0" | tee -a $out/results
start_sky --stats-interval 0 --class 'pm-writer=pm-writer' --class 'cpu-*=compute' || exit 1
NAME=sky run_one x - - - - | tee -a $out/results
stop_sky >/dev/null

# The table: every rate as a ratio to EEVDF's in this boot.
echo
echo "| placement | PM writes/s | vs EEVDF | compute rounds/s | vs EEVDF | PM time beside compute |"
echo "| --- | --- | --- | --- | --- | --- |"
awk '{
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	if (NR == 1) { w0 = f["writes_per_s"]; r0 = f["rounds_per_s"] }
	# Parenthesised: a bare `>` in printf's arguments is a redirection.
	printf "| %s | %s | %.2f | %s | %.2f | %s |\n", f["placement"], f["writes_per_s"],
		(w0 > 0 ? f["writes_per_s"] / w0 : 0), f["rounds_per_s"],
		(r0 > 0 ? f["rounds_per_s"] / r0 : 0), f["beside_compute"]
}' $out/results
echo "TCG models no SMT contention: only the placement column is meaningful in a VM."
report_dmesg
