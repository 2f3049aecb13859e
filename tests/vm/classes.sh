# Class hints reach BPF: scx_sky started with --class rules, a PM writer
# and two compute tasks (sky-work names its processes pm-writer and
# cpu-<kind>) run for 3 s, and BPF charges their run time to their
# classes (`ran_ns_*` in the totals). Then 20 processes of 20 ms each,
# named cpu-matmul and hinted memory-bound: they end before the daemon's
# next look (every second when BPF applies every hint, as here) but one,
# so their time counts as memory-bound only because BPF matches the name
# hint itself. ${1} replaces that hint (a glob BPF cannot apply, e.g.
# 'cpu-matmu?=memory-bound', shows what the daemon alone catches, looking
# every 100 ms then).
. ./lib.sh
start_sky --stats-interval 1 --class 'pm-writer=pm-writer' --class 'cpu-idiv=compute' \
	--class "${1:-cpu-matmul=memory-bound}" || exit 1
sky-work pm-write --file /tmp/pm --size-mb 16 --seconds 3 &
pm=$!
sky-work compute --kind idiv --seconds 3 &
idiv=$!
sky-work compute --kind idiv --seconds 3
wait "$pm" "$idiv"
i=0
while [ "$i" -lt 20 ]; do
	sky-work compute --kind matmul --seconds 0.02 >/dev/null
	i=$((i + 1))
done
echo "check state_after_load=$(state)"
stop_sky
report_dmesg
