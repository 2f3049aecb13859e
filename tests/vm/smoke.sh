# The kernel-matrix smoke test, one boot per kernel: load and unload scx_sky
# around a little work (as lifecycle.sh begins), then SKY-1's workload under sky1 (as
# sky1.sh). Each part starts with a `smoke: NAME` line; `cargo xtask matrix`
# judges the `check` and `stats total:` lines of each part.
. ./lib.sh

# start_smoke ARGS...: start scx_sky and wait until sched_ext is enabled or
# scx_sky exits. Verifying its BPF can take a minute under TCG, so this
# waits up to 3 minutes for a verdict rather than start_sky's 30 s.
start_smoke() {
	scx_sky "$@" >/tmp/sky.log 2>&1 &
	SKY_PID=$!
	tenths=0
	while [ "$(state)" != enabled ]; do
		if ! kill -0 "$SKY_PID" 2>/dev/null; then
			wait "$SKY_PID"
			rc=$?
			cat /tmp/sky.log
			echo "check sky_start_exit=$rc"
			return 1
		fi
		if [ "$tenths" -ge 1800 ]; then
			cat /tmp/sky.log
			echo "check sky_start_timeout=180s state=$(state)"
			kill -INT "$SKY_PID"
			return 1
		fi
		sleep 0.1
		tenths=$((tenths + 1))
	done
	echo "check load_seconds=$((tenths / 10))"
}

echo "smoke: load"
echo "check state_before=$(state)"
if ! start_smoke --stats-interval 0; then
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
start_smoke --policy sky1 --stats-interval 0 || exit 1
echo "check state_running=$(state)"
sky-work cache-loop --procs 8 --array-kb 4 --seconds "${1:-4}"
stop_sky
echo "check state_after=$(state)"

echo "smoke: end"
report_dmesg
