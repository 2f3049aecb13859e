# PMU plumbing end to end where there is no PMU (the VM): `--pmu software`
# opens software clocks in place of cycles and instructions, and page
# faults in place of LLC misses (so cache pressure is measured), on every CPU,
# BPF charges them to the task that ran at each context switch, the daemon
# turns the sums into per-period deltas and the classifier classes every
# busy task as compute (a CPI of about 1). So an unhinted compute task
# (sky-work names it cpu-idiv, and no hint covers that name) gets its
# class from the counters alone, logged with the features that decided it
# (`class: task N (cpu-idiv) measured unknown -> compute: cpi=1.00 ...`),
# and BPF charges its run time as compute (`ran_ns_compute`); a PM writer
# with a hint stays a PM writer (a hint beats the PMU). Both workloads
# print the run time the kernel counted for them (`run_ms`), which is
# what BPF's per-class sums are held against. The counts are
# recorded (--record-counters) and replayed through the classifier, which
# must class the compute task the same way from the record. Then scx_sky
# with the default `--pmu auto` must say plainly that the VM has no PMU.
# Meanwhile a 3-thread gang's counts feed the gangs' CPI test: `scx_sky
# gangs --pid` shows its samples (software clocks give every task a CPI of
# about 1, so it never finds the gang memory-bound). Last, CPU hotplug: a
# CPU that comes back online gets its counters anew.
. ./lib.sh
start_sky --stats-interval 1 --log-level debug --pmu software --class 'pm-writer=pm-writer' \
	--record-counters /tmp/counters.csv || exit 1
sky-work pm-write --file /tmp/pm --size-mb 8 --seconds 3 >/tmp/pm.out &
pm=$!
named_work /tmp mb-x
/tmp/mb-x gang --threads 3 --mb 4 --seconds 4 >/dev/null &
gang=$!
sky-work compute --kind idiv --seconds 3
sky_query gangs --pid "$gang" | sed 's/^/gangs: /'
wait "$pm" "$gang"
cat /tmp/pm.out
rm -f /tmp/pm
echo "check state_after_software=$(state)"
stop_sky
scx_sky classify --replay /tmp/counters.csv >/tmp/replay.out 2>&1
echo "check replay_exit=$?"
echo "check recorded_rows=$(grep -c '^[0-9]' /tmp/counters.csv)"
grep '^final  cpu-idiv/' /tmp/replay.out
echo "check replay_idiv=$(grep '^final  cpu-idiv/' /tmp/replay.out | awk '{print $3}' | head -1)"
start_sky --stats-interval 0 --class 'pm-writer=pm-writer' || exit 1
echo "check state_after_auto=$(state)"
stop_sky
# A CPU offline at start gets its counters when it comes online: its
# context switches are charged, not read errors. Here it comes online in
# a cache domain BPF did not know, so BPF asks for a reload, which opens
# them too; the daemon opens them within a loop of the kernel listing the
# CPU online (`pmu_errors_before_reload`, shown: the read errors of the
# first instance, those of the CPU's bring-up). Then the CPU is taken down
# and brought back: errors are summed over the stats lines of a compute
# task pinned there, after a settling second.
echo 0 >/sys/devices/system/cpu/cpu3/online
start_sky --stats-interval 1 --pmu software || exit 1
echo 1 >/sys/devices/system/cpu/cpu3/online
wait_reload
echo "check pmu_errors_before_reload=$(grep 'stats total:' /tmp/sky.log | head -1 |
	sed -n 's/.* pmu_read_errors=\([0-9]*\).*/\1/p')"
echo 0 >/sys/devices/system/cpu/cpu3/online
sleep 0.5
echo 1 >/sys/devices/system/cpu/cpu3/online
sleep 2
settled=$(grep -c 'stats: ' /tmp/sky.log)
taskset -c 3 sky-work compute --kind idiv --seconds 3 >/dev/null
sleep 1.5
echo "check pmu_opened_cpu3=$(grep -c 'PMU: counters opened on CPU 3' /tmp/sky.log)"
echo "check pmu_errors_after_online=$(grep 'stats: ' /tmp/sky.log | tail -n +$((settled + 2)) |
	sed -n 's/.* pmu_read_errors=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')"
echo "check pmu_lines_after_online=$(grep 'stats: ' /tmp/sky.log | tail -n +$((settled + 2)) | wc -l)"
stop_sky
report_dmesg 'unregistered from BPF|came online in an unknown cache domain'
