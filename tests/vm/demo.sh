# The main job inside the VM: scx_sky with SKY-1 and its stats while the
# SKY-1 workload runs.
. ./lib.sh
start_sky --policy sky1 --stats-interval 1 || exit 1
sky-work cache-loop --procs 8 --seconds "${1:-10}"
stop_sky
report_dmesg
