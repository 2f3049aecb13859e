# Class hints reach BPF: scx_sky started with --class rules, a PM writer
# and two compute tasks (sky-work names its processes pm-writer and
# cpu-<kind>) run for 3 s, and BPF charges their run time to their
# classes (`ran_ns_*` in the totals); a rule that names no task classes
# nothing, and everything else stays unknown.
. ./lib.sh
start_sky --stats-interval 1 --class 'pm-writer=pm-writer' --class 'cpu-*=compute' \
	--class 'no-such-task=memory-bound' || exit 1
sky-work pm-write --file /tmp/pm --size-mb 16 --seconds 3 &
pm=$!
sky-work compute --kind idiv --seconds 3 &
idiv=$!
sky-work compute --kind matmul --seconds 3
wait "$pm" "$idiv"
echo "check state_after_load=$(state)"
stop_sky
report_dmesg
