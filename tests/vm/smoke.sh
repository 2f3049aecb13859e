# The kernel-matrix smoke test, one boot per kernel: load and unload scx_sky
# around a little work (as lifecycle.sh begins), then SKY-1's workload under sky1 (as
# sky1.sh). Each part starts with a `smoke: NAME` line; `cargo xtask matrix`
# judges the `check` and `stats total:` lines of each part.
. ./lib.sh

# Verifying scx_sky's BPF can take a minute under TCG (6.18, 6.19): wait
# up to 3 minutes for a verdict.
export SKY_START_WAIT_S=180

echo "smoke: load"
echo "check state_before=$(state)"
if ! start_sky --stats-interval 0; then
	echo "check loaded=no"
	report_dmesg
	exit 1
fi
echo "check loaded=yes"
echo "check state_running=$(state)"
echo "check ops=$(cat /sys/kernel/sched_ext/root/ops)"
sky-work burn --threads "$(nproc)" --seconds 2
stop_sky
echo "check state_after=$(state)"

echo "smoke: sky1"
start_sky --policy sky1 --stats-interval 0 || exit 1
echo "check state_running=$(state)"
sky-work cache-loop --procs 8 --array-kb 4 --seconds "${1:-4}"
stop_sky
echo "check state_after=$(state)"

echo "smoke: end"
report_dmesg
