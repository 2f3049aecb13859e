# SKY-1's workload under the sky1 policy: 8 processes on small arrays.
. ./lib.sh
start_sky --policy sky1 --stats-interval 2 || exit 1
sky-work cache-loop --procs 8 --array-kb 4 --seconds "${1:-6}"
stop_sky
report_dmesg
