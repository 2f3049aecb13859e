# What scx_sky changes, for a first look: SKY-1's workload (processes on
# small arrays, short bursts and sleeps, two per CPU) under the kernel's own
# scheduler (EEVDF), then under scx_sky's sky1 policy with its stats, then
# both side by side. The comparison uses the kernel's counters
# (/proc/PID/sched, schedstat), not scx_sky's.
. ./lib.sh
secs=${1:-8}
procs=$(($(nproc) * 2))
echo "demo: $procs processes on $(nproc) CPUs, ${secs} s under EEVDF, then ${secs} s under scx_sky sky1"
echo "demo: EEVDF (the kernel's default scheduler)"
sky-work cache-loop --procs "$procs" --array-kb 4 --seconds "$secs" | tee /tmp/eevdf.result
echo "demo: scx_sky --policy sky1"
start_sky --policy sky1 --stats-interval 2 || exit 1
sky-work cache-loop --procs "$procs" --array-kb 4 --seconds "$secs" | tee /tmp/sky1.result
stop_sky
report_dmesg

# row NAME FILE: one line of the comparison from a `result` line.
row() {
	awk -v name="$1" '/^result workload=cache-loop/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		share = v["timeslices"] > 0 ? 100 * (1 - v["migrations"] / v["timeslices"]) : 0
		printf "%-16s %13.1f%% %14s %12s\n", name, share, v["wait_p99_us"], v["passes"]
	}' "$2"
}
echo
echo "demo: same workload, same VM; last-CPU share = 1 - migrations/timeslices"
printf "%-16s %14s %14s %12s\n" scheduler "last-CPU share" "p99 wait (us)" "work"
row EEVDF /tmp/eevdf.result
row "scx_sky sky1" /tmp/sky1.result
echo "demo: TCG emulates no caches: judge placement (last-CPU share), not speed"
