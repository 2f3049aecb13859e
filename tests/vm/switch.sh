# Runtime policy switching in one scheduler run. On a quiet guest first,
# what needs no load: a malformed policy file refused with the field
# named while the running policy stays, a non-root user refused, malformed
# requests on the socket refused, statistics through the scx_stats socket
# (JSON, stats_meta, OpenMetrics, --monitor). Then under a load (a compute
# task on half the CPUs, SKY-1's processes and a ping-pong pair, until
# stopped):
# every preset in turn through `scx_sky policy set` (generation moves,
# `policy get` names it), SIGHUP re-reading the start policy, `scx_sky
# top` (a text snapshot, then driven through a terminal by its keys), then
# a storm of switches as fast as the socket answers for ${1:-10} s
# (`sky-work policy-storm`, one connection): every switch answered is a
# generation, none refused. The kernel log must show the scheduler enabled
# once and never disabled before the end; every load process, stopped
# then, must report.
. ./lib.sh
secs=${1:-10}
n=$(nproc)

# The compute tasks are classed by name, so `top` has classes to show.
start_sky --stats-interval 5 --class 'cpu-idiv=compute' || exit 1

phase quiet-checks
# A malformed policy: refused, naming the field; the running one stays.
printf 'name = "bad"\ndescription = "x"\naffinity = true\nwalk_depth = 99\nslice_us = 5000\naffinity_grace_us = 1000\nsleeper_credit_us = 5000\nstarve_ms = 50\n' >/tmp/bad.toml
scx_sky policy set /tmp/bad.toml >/tmp/bad.out 2>&1
echo "check bad_exit=$?"
grep -q 'walk_depth = 99' /tmp/bad.out && echo "check bad_names_field=1"
cat /tmp/bad.out
echo "check after_bad=$(policy_name)"

# A user other than root may not switch.
mkdir -p /etc
grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd
grep -q '^nogroup:' /etc/group 2>/dev/null || echo 'nogroup:x:65534:' >>/etc/group
su nobody -s /bin/sh -c 'scx_sky --control-dir /run/scx_sky policy set vtime' >/tmp/nobody.out 2>&1
echo "check nobody_exit=$?"
grep -q 'only root may control' /tmp/nobody.out && echo "check nobody_told=1"
cat /tmp/nobody.out
# Without --control-dir a user who is not root asks the D-Bus service;
# the VM has no system bus, and the user is told only root may.
su nobody -s /bin/sh -c 'scx_sky policy set vtime' >/tmp/nobody-bus.out 2>&1
echo "check nobody_bus_exit=$?"
grep -q 'only root may control' /tmp/nobody-bus.out && echo "check nobody_bus_told=1"
cat /tmp/nobody-bus.out

# Garbage, oversized and silent clients on the socket itself.
sky-work control-abuse
echo "check after_abuse=$(policy_name)"

# Statistics the scx way: the scx_stats socket answers stats_meta, a JSON
# sample (checked against the policy's generation now and the scheduler's
# own totals at the end), OpenMetrics text, and --monitor lines.
echo "check meta_fields=$(scx_sky stats --meta | grep -o '"desc"' | wc -l)"
scx_sky stats --json >/tmp/stats.json
echo "check json_policy=$(sed -n 's/.*"policy":"\([^"]*\)".*/\1/p' /tmp/stats.json)"
echo "check json_generation=$(sed -n 's/.*"generation":\([0-9]*\).*/\1/p' /tmp/stats.json)"
echo "check control_generation=$(policy_generation)"
echo "check json_dispatches=$(sed -n 's/.*"dispatches":\([0-9]*\).*/\1/p' /tmp/stats.json)"
scx_sky stats --openmetrics >/tmp/om.txt
echo "check om_last=$(tail -1 /tmp/om.txt | tr ' ' '_')"
echo "check om_dispatches=$(grep -c '^scx_sky_dispatches_total [0-9]' /tmp/om.txt)"
# Until its first line, however long a process takes to start here.
scx_sky --monitor 1 >/tmp/monitor.out 2>&1 &
monitor=$!
wait_line /tmp/monitor.out '^policy=sky1 generation=' "$monitor" 600 >/dev/null
kill "$monitor"
wait "$monitor"
echo "check monitor_lines=$(grep -c '^policy=sky1 generation=' /tmp/monitor.out)"
head -2 /tmp/monitor.out | cut -c1-120

phase load
# The load, until stopped at the end (SIGTERM: each process prints what
# it did): every kind of task a switch must not upset, as many as CPUs
# in all (more makes each command below take seconds to start under
# TCG): compute tasks on half the CPUs, SKY-1's bursts-and-sleeps
# processes and a ping-pong pair.
load=
i=0
while [ "$i" -lt "$((n / 2))" ]; do
	sky-work compute --kind idiv --seconds 900 >>/tmp/load.out &
	load="$load $!"
	i=$((i + 1))
done
sky-work cache-loop --procs "$((n / 2))" --seconds 900 >>/tmp/load.out &
load="$load $!"
sky-work pingpong --pairs 1 --seconds 900 >>/tmp/load.out &
load="$load $!"

phase presets
first=$(policy_generation)
for p in sky1-strict vtime sky1; do
	scx_sky policy set "$p"
	echo "check now_$p=$(policy_name)"
done
echo "check generations_moved=$(($(policy_generation) - first))"

phase sighup
# SIGHUP: the start policy (sky1) again, as a new generation.
scx_sky policy set vtime >/dev/null
before=$(policy_generation)
kill -HUP "$SKY_PID"
echo "check sighup_waited_halfs=$(wait_generation_past "$before")"
echo "check sighup_policy=$(policy_name)"
echo "check sighup_moved=$(($(policy_generation) - before))"

phase top
# scx_sky top, one screen as text: the policy, the topology and the load.
scx_sky top --snapshot >/tmp/top.txt 2>&1
echo "check top_exit=$?"
cat /tmp/top.txt
echo "check top_lines=$(wc -l </tmp/top.txt)"
grep -q 'policy sky1 (generation' /tmp/top.txt && echo "check top_policy=1"
grep -q 'cache domain 0' /tmp/top.txt && echo "check top_topology=1"
grep -q 'cpu-idiv' /tmp/top.txt && echo "check top_tasks=1"
grep -q 'cpu-idiv .* C cpu' /tmp/top.txt && echo "check top_classes=1"
# Each compute task's wait p99 over the period, from scx_sky's histograms.
grep -q 'p99_us' /tmp/top.txt &&
	grep -Eq 'cpu-idiv +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +C cpu' /tmp/top.txt &&
	echo "check top_p99=1"
# Not root: the screen says why there are no scheduler figures.
su nobody -s /bin/sh -c 'scx_sky top --snapshot' >/tmp/top-nobody.txt 2>&1
echo "check top_nobody_exit=$?"
grep -q 'no scx_sky statistics' /tmp/top-nobody.txt && echo "check top_nobody_told=1"

phase tui
# scx_sky top in a terminal, driven by its keys: `p` switches to the
# next preset (sky1 -> sky1-strict), the screen shows it, `q` quits and
# leaves the terminal as it found it.
sky-tui-drive --keys 'wait:policy sky1 (generation;key:p;wait:policy sky1-strict (generation;screen;key:q' \
	-- scx_sky top >/tmp/drive.out 2>&1
echo "check drive_exit=$?"
sed -n 's/^screen| //p' /tmp/drive.out | head -24
grep '^result workload=tui-drive' /tmp/drive.out
echo "check drive_running=$(policy_name)"
scx_sky policy set sky1 >/dev/null

phase storm
# The storm: every switch it was answered for must be a generation.
before=$(policy_generation)
sky-work policy-storm --seconds "$secs"
echo "check storm_generations=$(($(policy_generation) - before))"
echo "check state_after_storm=$(state)"
# shellcheck disable=SC2086
kill -TERM $load
# shellcheck disable=SC2086
wait $load
phase load-stopped
echo "check load_results=$(grep -c '^result' /tmp/load.out)"
echo "check load_expected=$((n / 2 + 2))"
stop_sky
echo "check enabled_lines=$(dmesg | grep -c 'sched_ext: BPF scheduler .* enabled')"
echo "check disable_reasons=$(disable_reasons)"
report_dmesg
