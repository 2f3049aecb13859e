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
#
# Then a runtime switch to a policy with hints and a gang rule of its own
# (`hinted`: cpu-matadd is memory-bound and its processes one gang): BPF
# applies the name hint from the switch on, to 20 short cpu-matadd
# processes the daemon never sees (memory-bound time grows by theirs); the
# daemon classes two long ones by it (its census) and gathers them into
# the rule's gang (`scx_sky gangs`). Back on sky1, none of it holds.
. ./lib.sh
start_sky --stats-interval 1 --class 'pm-writer=pm-writer' --class 'cpu-idiv=compute' \
	--class "${1:-cpu-matmul=memory-bound}" || exit 1
sky-work pm-write --file /tmp/pm --size-mb 16 --seconds 3 &
pm=$!
sky-work compute --kind idiv --seconds 3 &
idiv=$!
sky-work compute --kind idiv --seconds 3
wait "$pm" "$idiv"
mb_ns() {
	sky_query stats --json | sed -n 's/.*"ran_ns_memory_bound":\([0-9]*\).*/\1/p'
}
# run_ms_sum FILE: the run time (ms, the kernel's, since each took its
# name) of the processes whose result lines FILE holds.
run_ms_sum() {
	sed -n 's/.* run_ms=\([0-9]*\).*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }'
}
: >/tmp/matmul.out
i=0
while [ "$i" -lt 20 ]; do
	sky-work compute --kind matmul --seconds 0.02 >>/tmp/matmul.out
	i=$((i + 1))
done
echo "check matmul_run_ms=$(run_ms_sum /tmp/matmul.out)"
echo "check matmul_mb_ns=$(mb_ns)"
echo "check state_after_load=$(state)"

# short_matadds NAME: 20 cpu-matadd processes of 20 ms; prints the
# memory-bound nanoseconds they added (check NAME_mb_ns) and their run
# time (check NAME_run_ms).
short_matadds() {
	before=$(mb_ns)
	: >/tmp/matadd.out
	i=0
	while [ "$i" -lt 20 ]; do
		sky-work compute --kind matadd --seconds 0.02 >>/tmp/matadd.out
		i=$((i + 1))
	done
	echo "check ${1}_mb_ns=$(($(mb_ns) - before))"
	echo "check ${1}_run_ms=$(run_ms_sum /tmp/matadd.out)"
}
# long_matadds: two cpu-matadd processes of 3 s; after 2 s, the daemon's
# census and gangs.
long_matadds() {
	sky-work compute --kind matadd --seconds 3 >/dev/null &
	one=$!
	sky-work compute --kind matadd --seconds 3 >/dev/null &
	two=$!
	sleep 2
	sky_query gangs >/tmp/gangs.txt
	wait "$one" "$two"
}
printf '%s\n' 'name = "hinted"' 'description = "sky1, cpu-matadd memory-bound and one gang"' \
	'affinity = true' 'walk_depth = 8' 'slice_us = 5000' 'affinity_grace_us = 1000' \
	'sleeper_credit_us = 5000' 'starve_ms = 50' '[[class_rule]]' 'comm = "cpu-matadd"' \
	'class = "memory-bound"' '[[gang_rule]]' 'comm = "cpu-matadd"' 'memory_bound = true' \
	>/tmp/hinted.toml
short_matadds before_switch
scx_sky policy set /tmp/hinted.toml >/dev/null
echo "check switch_exit=$?"
short_matadds hinted
stats_lines=$(grep -c 'stats: ' /tmp/sky.log)
long_matadds
sed 's/^/hinted gangs: /' /tmp/gangs.txt
echo "check hinted_rule_gangs=$(grep -c '^gang .*rule' /tmp/gangs.txt)"
echo "check hinted_census=$(tail -n +$((stats_lines + 1)) /tmp/sky.log | grep 'stats: ' |
	grep -c 'memory-bound=2')"
scx_sky policy set sky1 >/dev/null
echo "check back_exit=$?"
short_matadds back
long_matadds
sed 's/^/back gangs: /' /tmp/gangs.txt
echo "check back_rule_gangs=$(grep -c '^gang .*rule' /tmp/gangs.txt)"
echo "check state_after_switches=$(state)"
stop_sky
report_dmesg
