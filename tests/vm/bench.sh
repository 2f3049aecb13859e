# SKY-1 workload under EEVDF and scx_sky (vtime: no affinity; sky1-strict:
# the paper's SKY-1; sky1: SKY-1 with the affinity grace),
# one after another in the same VM. Figures come from kernel counters.
. ./lib.sh
secs=${1:-5}
tag() { sed "s/^result /result scheduler=$1 /"; }
sky-work cache-loop --procs 8 --seconds "$secs" | tag eevdf
for policy in vtime sky1-strict sky1; do
	start_sky --policy "$policy" --stats-interval 0 || exit 1
	sky-work cache-loop --procs 8 --seconds "$secs" | tag "scx_sky-$policy"
	stop_sky >/dev/null
done
report_dmesg
