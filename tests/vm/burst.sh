# 10 000 threads released at once while scx_sky runs.
. ./lib.sh
start_sky --stats-interval 2 || exit 1
sky-work burst --count 10000 --spin-us 200
echo "check state_after_burst=$(state)"
stop_sky
report_dmesg
