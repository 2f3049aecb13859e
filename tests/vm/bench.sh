# SKY-1 workload under EEVDF, scx_sky vtime (no affinity) and scx_sky sky1,
# one after another in the same VM. Figures come from kernel counters.
. ./lib.sh
secs=${1:-5}
tag() { sed "s/^result /result scheduler=$1 /"; }
sky-work cache-loop --procs 8 --seconds "$secs" | tag eevdf
for policy in vtime sky1; do
	start_sky --policy "$policy" --stats-interval 0 || exit 1
	sky-work cache-loop --procs 8 --seconds "$secs" | tag "scx_sky-$policy"
	stop_sky >/dev/null
done
report_dmesg
