# Shared helpers for the VM scenarios (busybox sh). Scenarios print
# `check key=value` lines; the host-side tests in tests/vm.rs judge them.

# policy_generation / policy_name: the running policy's, from `policy get`.
policy_generation() {
	scx_sky policy get | sed -n '1s/.*generation=\([0-9]*\).*/\1/p'
}
policy_name() {
	scx_sky policy get | sed -n '1s/.*policy=\([^ ]*\).*/\1/p'
}

# wait_generation_past GEN: waits (at most 15 s) for the policy's
# generation to move past GEN, and says how many half seconds it took. A
# SIGHUP wakes the daemon's loop, which switches on its next turn; under
# TCG with a load on every CPU that turn can come late (a fixed one-second
# sleep saw the old policy once in CI).
wait_generation_past() {
	waited=0
	while [ "$(policy_generation)" = "$1" ] && [ "$waited" -lt 30 ]; do
		sleep 0.5
		waited=$((waited + 1))
	done
	echo "$waited"
}

state() {
	cat /sys/kernel/sched_ext/state
}

# phase NAME: where a scenario is, with the guest's uptime, so that a log
# shows where its time went.
phase() {
	echo "phase $1 uptime_s=$(cut -d' ' -f1 /proc/uptime)"
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
	[ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$1/stat" 2>/dev/null
}

# wait_line FILE TEXT PID TENTHS: waits until FILE contains TEXT; gives up
# (printing FILE, status 1) once PID is gone or after TENTHS tenths of a
# second.
wait_line() {
	tenths=0
	until grep -q "$2" "$1"; do
		if ! alive "$3" || [ "$tenths" -ge "$4" ]; then
			cat "$1"
			return 1
		fi
		sleep 0.1
		tenths=$((tenths + 1))
	done
}

# wait_state WANT [PID]: wait up to $SKY_STATE_WAIT_S seconds (120) for
# sched_ext to reach WANT; give up at once if PID (the scheduler) has
# exited.
wait_state() {
	tries=0
	while [ "$(state)" != "$1" ]; do
		if [ -n "$2" ] && ! alive "$2"; then
			echo "check scheduler_exited_before=$1 state=$(state)"
			return 1
		fi
		tries=$((tries + 1))
		if [ "$tries" -gt "$((${SKY_STATE_WAIT_S:-120} * 10))" ]; then
			echo "check timeout_waiting_for=$1 state=$(state)"
			return 1
		fi
		sleep 0.1
	done
}

# The guest's timer tick, the unit waits are judged in (tests/scenario's
# Promise).
echo "check tick_hz=$(sed -n 's/^CONFIG_HZ=//p' "/boot/config-$(uname -r)")"

# A stall must fail a scenario in seconds, not hide under the kernel's 30 s
# default: the sched_ext watchdog ejects a scheduler that leaves any
# runnable task waiting this long (scx_utils reads it at load).
export SCX_TIMEOUT_MS=${SCX_TIMEOUT_MS:-3000}

# wait_reload: after a CPU came online in a cache domain BPF did not know,
# waits for scx_sky's second attach (the reload BPF asked for) and for the
# scheduler to be enabled again.
wait_reload() {
	tries=0
	while [ "$(grep -c 'scx_sky attached' /tmp/sky.log)" -lt 2 ] && [ "$tries" -lt 100 ]; do
		tries=$((tries + 1))
		sleep 0.1
	done
	wait_state enabled "$SKY_PID"
}

# start_sky ARGS...: start scx_sky in the background and wait until
# sched_ext is enabled or scx_sky exits, at most $SKY_START_WAIT_S seconds
# (180: these waits only guard against a hang, and verifying the BPF can
# take a minute under TCG on some kernels or under load). On
# failure it shows the log, says how the start ended, and leaves sched_ext
# disabled so another scheduler can be tried.
start_sky() {
	start_sched scx_sky "$@" || return 1
	promise
}

# promise: the wait the running scx_sky promises, from its start-up line
# (tests/scenario's Promise judges waits in ticks past it).
promise() {
	sed -n 's/.*slice \([0-9]*\)-\([0-9]*\) us, .*wait bound \([0-9]*\) ms.*/result promise slice_min_us=\1 slice_max_us=\2 bound_ms=\3/p' /tmp/sky.log
}

# start_sched PROGRAM ARGS...: the same for any sched_ext scheduler (the
# evaluation's anchors); stop_sky stops it.
start_sched() {
	"$@" >/tmp/sky.log 2>&1 &
	SKY_PID=$!
	tenths=0
	while [ "$(state)" != enabled ]; do
		if ! alive "$SKY_PID"; then
			wait "$SKY_PID"
			rc=$?
			cat /tmp/sky.log
			echo "check sky_start_exit=$rc"
			wait_state disabled
			return 1
		fi
		if [ "$tenths" -ge "$((${SKY_START_WAIT_S:-180} * 10))" ]; then
			cat /tmp/sky.log
			echo "check sky_start_timeout=${SKY_START_WAIT_S:-180}s state=$(state)"
			kill -INT "$SKY_PID"
			wait "$SKY_PID"
			wait_state disabled
			return 1
		fi
		sleep 0.1
		tenths=$((tenths + 1))
	done
	echo "check load_seconds=$((tenths / 10))"
}

# sky_query ARGS...: `scx_sky ARGS` (a read of the running scheduler's
# statistics socket: stats, gangs, top), asked again, up to six times,
# when the read timed out (the client waits 5 s for an answer). Under
# overload in TCG the daemon has been seen to answer later than that;
# each such time leaves a `query timed out` line with where the daemon's
# threads were, for the logs, rather than failing a scenario that judges
# something else. Each call has its own output file: scenarios query in
# the background while the foreground queries too.
sky_query() {
	local out
	out=$(mktemp /tmp/query.XXXXXX)
	for try in 1 2 3 4 5 6; do
		if scx_sky "$@" >"$out" 2>&1; then
			cat "$out"
			rm -f "$out"
			return 0
		fi
		if ! grep -q 'timed out' "$out" || [ "$try" = 6 ]; then
			cat "$out"
			rm -f "$out"
			return 1
		fi
		echo "query timed out: scx_sky $* (try $try): $(head -1 "$out")" >&2
		for t in /proc/"$SKY_PID"/task/*; do
			echo "query timed out:   $(cat "$t/comm" 2>/dev/null) state=$(cut -d' ' -f3 "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)" >&2
		done
	done
}

# dump_stuck PID: where PID's threads and every blocked task are, and what
# each CPU runs, for a scenario that found something stuck.
dump_stuck() {
	for t in /proc/"$1"/task/*; do
		echo "stuck: thread $t $(cat "$t/comm" 2>/dev/null) state=$(cut -d' ' -f3 "$t/stat" 2>/dev/null)"
		sed 's/^/stuck:   /' "$t/stack" 2>/dev/null
	done
	echo w >/proc/sysrq-trigger
	echo l >/proc/sysrq-trigger
	sleep 1
	dmesg | tail -n 300 | sed 's/^/stuck: /'
}

# stop_sky: SIGINT, wait for a clean exit, show its log. A scheduler that
# has not detached after $SKY_STOP_WAIT_S seconds (60; it takes well under
# one) is reported with a dump of where it is stuck, and killed.
stop_sky() {
	kill -INT "$SKY_PID"
	tenths=0
	while alive "$SKY_PID"; do
		if [ "$tenths" -ge "$((${SKY_STOP_WAIT_S:-60} * 10))" ]; then
			echo "check sky_stop_timeout=${SKY_STOP_WAIT_S:-60}s state=$(state)"
			dump_stuck "$SKY_PID"
			kill -KILL "$SKY_PID"
			break
		fi
		sleep 0.1
		tenths=$((tenths + 1))
	done
	wait "$SKY_PID"
	rc=$?
	cat /tmp/sky.log
	echo "check sky_exit=$rc"
	wait_state disabled
}

# Kernel messages that mean a scheduler failed: a sched_ext disable for any
# reason but a clean unregister (or one the scenario expects, given as an
# extended regex in $1), watchdog stalls, BUGs, oopses, warnings. "stall"
# must start a word: "Installing" (9p, built into custom kernels) is no
# stall. Lines the kernel logged before this file was first sourced (a
# fault of the kernel under test while booting, before any scheduler ran)
# are not counted: report_dmesg names them apart as boot_errors.
dmesg_errors() {
	if [ -s /tmp/boot-errors ]; then
		all_dmesg_errors "$1" | grep -vxF -f /tmp/boot-errors
	else
		all_dmesg_errors "$1"
	fi
}
all_dmesg_errors() {
	dmesg | grep -E 'sched_ext|BUG:|Oops|WARNING:|(^|[^a-z])stall' |
		grep -vE "enabled\$|unregistered from user space|sched_ext: \"${1:+|$1}" |
		grep -E 'disabled|error|BUG:|Oops|WARNING:|(^|[^a-z])stall'
}
[ -e /tmp/boot-errors ] || all_dmesg_errors >/tmp/boot-errors

# The kernel's own sched_ext event counters for the loaded scheduler, one
# line (tasks the kernel put in its global fallback queue because their
# CPU went offline, dispatches that fell back, ...): a scheduler-independent
# account of what a long wait went through. Absent before 6.16: says so.
scx_events() {
	f=/sys/kernel/sched_ext/root/events
	if [ -r "$f" ]; then
		echo "result scx_events $(awk '{printf "%s=%s ", $1, $2}' "$f")"
	else
		echo "result scx_events unavailable"
	fi
}

# report_dmesg [EXPECTED]: the sched_ext log, the count of failures, and
# the kernel's own boot-time errors (not scx_sky's: nothing had run yet).
report_dmesg() {
	dmesg | grep sched_ext
	dmesg_errors "$1"
	echo "check dmesg_errors=$(dmesg_errors "$1" | wc -l)"
	sed 's/^/boot-error: /' /tmp/boot-errors
	echo "check boot_errors=$(wc -l </tmp/boot-errors)"
}

# The `sched_ext: BPF scheduler ... disabled (REASON)` lines so far, as
# REASON words joined by commas: what the kernel said each time it ended.
disable_reasons() {
	dmesg | sed -n 's/.*sched_ext: BPF scheduler .* disabled (\(.*\))$/\1/p' |
		tr ' \n' '-,' | sed 's/,$//'
}

# named_work DIR NAME...: DIR/NAME links to sky-work, so a task started
# as DIR/NAME is named NAME (a process is named at exec): the observers and
# scx_sky's class rules go by name.
named_work() {
	dir=$1
	shift
	mkdir -p "$dir"
	for named_work_name in "$@"; do
		ln -sf "$(command -v sky-work)" "$dir/$named_work_name"
	done
}

# start_trace [ARGS]: start the tracepoint observer (sky-work trace-waits
# ARGS), which sees every wait of every task whatever the scheduler, and
# wait until it traces (at most 30 s; fails, saying so, if it does not: a
# workload started before that would be partly unseen). stop_trace: stop
# it, print its result lines and `check trace_exit=` (non-zero if it
# failed or lost events).
start_trace() {
	# Emptied here, not only by the background job's redirection: that
	# runs in the child, maybe after wait_line has already found the last
	# trace's line in the old file, and the workload would start unseen.
	: >/tmp/trace.err
	sky-work trace-waits "$@" >/tmp/trace.out 2>/tmp/trace.err &
	TRACE_PID=$!
	wait_line /tmp/trace.err 'tracing scheduler events' "$TRACE_PID" 300 && return 0
	echo "check trace_started=0"
	return 1
}

# trace_mark TEXT: a line in the trace (the observer reads sky-hotplug-begin
# and sky-hotplug-end around a CPU going off- or online).
trace_mark() {
	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		# (Refused while no trace runs: nothing to mark then.)
		[ -w "$d/trace_marker" ] && { echo "$1" >"$d/trace_marker"; } 2>/dev/null && return
	done
}

# set_online CPU 0|1: take a CPU offline or bring it back, marked in the
# trace so waits the machine-wide stop caused are told apart.
set_online() {
	trace_mark sky-hotplug-begin
	echo "$2" >/sys/devices/system/cpu/cpu$1/online
	trace_mark sky-hotplug-end
}

# cycle_cpus SECONDS CPU...: for about SECONDS, takes each CPU offline
# for half a second and brings it back, one after another.
cycle_cpus() {
	end=$(($(date +%s) + $1))
	shift
	while [ "$(date +%s)" -lt "$end" ]; do
		for cpu in "$@"; do
			set_online "$cpu" 0
			sleep 0.5
			set_online "$cpu" 1
			sleep 0.5
		done
	done
}

stop_trace() {
	kill -INT "$TRACE_PID"
	wait "$TRACE_PID"
	rc=$?
	cat /tmp/trace.out
	grep -v 'tracing scheduler events' /tmp/trace.err
	echo "check trace_exit=$rc"
	# Later checks win: an earlier trace's failure must not be hidden.
	[ "$rc" = 0 ] || echo "check trace_failed=$rc"
}

# bench_persistence FILE: the persistence sky-pvas-bench's space got at
# attach, as its heading in FILE names it: sets $persist (the method) and
# prints check persist= and check flush= (the write-back instruction,
# when the method names one: "flush+fence (clwb)").
bench_persistence() {
	persist=$(sed -n 's/.*(persistence: \([a-z+]*\).*/\1/p' "$1" | head -n 1)
	flush=$(sed -n 's/.*(persistence: [a-z+]* (\([a-z]*\)).*/\1/p' "$1" | head -n 1)
	echo "check flush=${flush:-none}"
	echo "check persist=${persist:-unknown}"
}

# pmem_devdax: make the emulated NVDIMM a Device DAX namespace
# (/dev/dax0.0: persistent memory mapped whole, which RDMA may pin, unlike
# the pages of a DAX filesystem), as pmem_dax_mount makes it fsdax (no
# labels; -f: the raw namespace is in use). Checks: pmem_namespace.
pmem_devdax() {
	ndctl create-namespace -f -e namespace0.0 -m devdax >/tmp/ndctl.out 2>&1 ||
		{ cat /tmp/ndctl.out; echo "check pmem_namespace=failed"; return 1; }
	# The namespace's mode comes first (its dax device's follows).
	mode=$(sed -n 's/^ *"mode":"\([a-z]*\)".*/\1/p' /tmp/ndctl.out | head -1)
	echo "check pmem_namespace=${mode:-unknown}"
	[ "$mode" = devdax ] || { cat /tmp/ndctl.out; return 1; }
	if [ ! -c /dev/dax0.0 ]; then
		dev=$(cat /sys/bus/dax/devices/dax0.0/dev 2>/dev/null) || { echo "no dax0.0"; return 1; }
		mknod /dev/dax0.0 c "${dev%%:*}" "${dev##*:}"
	fi
}

# pmem_dax_mount DIR: make the emulated NVDIMM (VmConfig pmem_mb, cargo
# xtask vm --pmem-mb) an fsdax namespace, put ext4 on it and mount it at
# DIR with DAX; fail unless DAX is really in effect. qemu's NVDIMM has no
# label area (no label-size=), so the kernel shows its whole region as one
# label-less raw namespace: /dev/pmem0 without struct pages, which ext4
# refuses to mount with dax ("DAX unsupported by block device"). ndctl
# turns it into fsdax by writing a pfn info block at the start of the
# namespace (the memmap for its pages goes there too, map=dev: 1024 MiB
# gives 1006 MiB), which needs no labels; -f because the namespace is in
# use (enabled) as raw. Checks: pmem_namespace (the mode ndctl reports),
# pmem_blockdev_dax (the block queue's dax flag), pmem_mount (dax when
# /proc/mounts shows the dax option).
pmem_dax_mount() {
	if [ ! -b /dev/pmem0 ]; then
		echo "check pmem=missing"
		return 1
	fi
	ndctl create-namespace -f -e namespace0.0 -m fsdax >/tmp/ndctl.out 2>&1 ||
		{ cat /tmp/ndctl.out; echo "check pmem_namespace=failed"; return 1; }
	mode=$(sed -n 's/^ *"mode":"\([a-z]*\)".*/\1/p' /tmp/ndctl.out)
	echo "check pmem_namespace=${mode:-unknown}"
	[ "$mode" = fsdax ] || { cat /tmp/ndctl.out; return 1; }
	echo "check pmem_blockdev_dax=$(cat /sys/block/pmem0/queue/dax)"
	mkdir -p "$1"
	# DAX needs blocks of a page: mke2fs picks 1 KiB ones below 512 MiB.
	mkfs.ext4 -q -F -b 4096 /dev/pmem0 || return 1
	if ! mount -t ext4 -o dax /dev/pmem0 "$1"; then
		dmesg | grep -i -e dax -e pmem | tail -5
		echo "check pmem_mount=failed"
		return 1
	fi
	# ext4 shows dax=always (older kernels: dax).
	opts=$(awk -v d="$1" '$2 == d { print $4 }' /proc/mounts)
	case ",$opts," in
	*,dax,* | *,dax=always,*) echo "check pmem_mount=dax" ;;
	*)
		echo "check pmem_mount=no-dax options=$opts"
		return 1
		;;
	esac
}

# rdma_pair: two network namespaces, a and b, joined by a veth pair
# (10.77.0.1 in a, 10.77.0.2 in b), with a soft-RoCE device on each end
# (rxe_a, rxe_b). Needs VmConfig rdma (cargo xtask vm --rdma): the modules,
# iproute2's ip and rdma at their full paths (busybox's ip applet knows no
# veth), rdma-core with perftest (xtask/src/guest_tools.rs). RDMA devices
# are shared by all namespaces (`rdma system`: netns shared); which one a
# program uses follows from the address it binds or connects (RDMA CM), or
# from -d. Checks: rdma_devices (how many rxe devices are ACTIVE).
rdma_pair() {
	IP=/usr/sbin/ip
	# ip netns keeps its namespaces as bind mounts under /run/netns.
	mkdir -p /run
	grep -q ' /run ' /proc/mounts || mount -t tmpfs run /run
	mkdir -p /run/netns
	for ns in a b; do
		$IP netns add "$ns" || return 1
		$IP -n "$ns" link set lo up
	done
	$IP link add veth_a netns a type veth peer name veth_b netns b || return 1
	$IP -n a addr add 10.77.0.1/24 dev veth_a
	$IP -n b addr add 10.77.0.2/24 dev veth_b
	$IP -n a link set veth_a up
	$IP -n b link set veth_b up
	$IP netns exec a /usr/bin/rdma link add rxe_a type rxe netdev veth_a || return 1
	$IP netns exec b /usr/bin/rdma link add rxe_b type rxe netdev veth_b || return 1
	within 100 rdma_active 2
	echo "check rdma_devices=$(/usr/bin/rdma link show | grep -c 'state ACTIVE')"
	/usr/bin/rdma link show
}

# For processes started in the background: `ip netns exec` execs the
# command (as sky-rdma-run does), so $! is the program itself and a kill
# reaches it (a shell function would run in a subshell of its own).
NS_EXEC="/usr/sbin/ip netns exec"

# listening PORT: waits (at most 30 s) until an RDMA CM id listens on
# PORT, so a client never connects before its server (a fixed sleep did
# not allow for a slow start under TCG).
listening() {
	within 300 cm_listens "$1" || { echo "no listener on port $1"; return 1; }
}

# cm_listens PORT: an RDMA CM id listens on PORT.
cm_listens() {
	/usr/bin/rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 "
}

# rdma_active N: at least N RDMA devices are ACTIVE.
rdma_active() {
	[ "$(/usr/bin/rdma link show 2>/dev/null | grep -c 'state ACTIVE')" -ge "$1" ]
}

# within TENTHS COMMAND...: runs COMMAND every tenth of a second until it
# succeeds, at most TENTHS times; 1 if it never did.
within() {
	within_left=$1
	shift
	until "$@"; do
		within_left=$((within_left - 1))
		[ "$within_left" -gt 0 ] || return 1
		sleep 0.1
	done
}

# perftest_clock_failed FILE: perftest's output in FILE says it could not
# calibrate its cycle counter against gettimeofday (a fit of 200 timed
# spins, refused below r^2 0.9: "Correlation coefficient r^2: ... < 0.9",
# then "Can't produce a report", exit 1). It does so after the exchange,
# for the report; a vCPU that the TCG host thread left waiting in a few
# of those spins spoils the fit: the host's timing, not the link.
perftest_clock_failed() {
	grep -q 'Correlation coefficient r^2' "$1"
}

# perftest: the server in b, the client in a, over RDMA CM (-R), one run
# each; bandwidth in MB/s, latency in microseconds. A client that could
# not calibrate its clock (perftest_clock_failed) runs again with a new
# server on a new port, up to three tries; each such try leaves a
# `check NAME_clock_again=TRY` line.
rdma_perf() {
	name=$1
	shift
	try=1
	while :; do
		port=$((18515 + 100 * (try - 1)))
		$NS_EXEC b "$name" -R -d rxe_b -p "$port" "$@" >/tmp/"$name".server 2>&1 &
		server=$!
		sleep 1
		in_ns a "$name" -R -d rxe_a -p "$port" "$@" 10.77.0.2 >/tmp/"$name".client 2>&1
		rc=$?
		if [ "$rc" != 0 ] && [ "$try" -lt 3 ] && perftest_clock_failed /tmp/"$name".client; then
			echo "check ${name}_clock_again=$try"
			kill -9 "$server" 2>/dev/null
			wait "$server"
			try=$((try + 1))
			continue
		fi
		bounded "$server" 120
		echo "check ${name}_exit=$rc"
		[ "$rc" = 0 ] || { cat /tmp/"$name".client /tmp/"$name".server; return 1; }
		cat /tmp/"$name".client
		return 0
	done
}

# bw_of TEST SIZE: the average bandwidth rdma_perf's TEST printed for SIZE
# ("#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]").
bw_of() {
	awk -v s="$2" '$1 == s && NF >= 4 { print $4 }' /tmp/"$1".client | tail -1
}

# lat_of TEST SIZE: the typical latency (us) rdma_perf's TEST printed for
# SIZE ("#bytes #iterations t_min t_max t_typical t_avg ...").
lat_of() {
	awk -v s="$2" '$1 == s && NF >= 5 { print $5 }' /tmp/"$1".client | tail -1
}

# in_ns NS COMMAND...: runs COMMAND in network namespace NS.
in_ns() {
	ns=$1
	shift
	/usr/sbin/ip netns exec "$ns" "$@"
}

# bounded PID SECS: waits for PID, killing it after SECS; its status.
bounded() {
	(
		sleep "$2"
		kill -9 "$1" 2>/dev/null
	) &
	guard=$!
	wait "$1"
	rc=$?
	kill "$guard" 2>/dev/null
	return "$rc"
}

# applied_once FILE N: 1 if FILE lists 1 to N, one a line, each once.
applied_once() {
	awk -v n="$2" 'NR != $1 { bad = 1 } END { print (bad || NR != n) ? 0 : 1 }' "$1" 2>/dev/null || echo 0
}

# The two-node test bed (cargo xtask vm --nodes 2, xtask/src/nodes.rs):
# this guest is node $SKY_NODE (1 or 2, from the kernel command line) and
# its peer the other, joined by one virtio-net link (eth0).
# rdma_node: gives eth0 10.77.0.$SKY_NODE, puts a soft-RoCE device (rxe0)
# on it and waits (at most 60 s) until the peer answers a ping: both are
# up. Sets PEER (the peer's address). Checks: rdma_node (this node's
# number once its device is ACTIVE and the peer answers).
rdma_node() {
	IP=/usr/sbin/ip
	case $SKY_NODE in
	1 | 2) ;;
	*)
		echo "rdma_node: SKY_NODE is '$SKY_NODE', not 1 or 2: boot with cargo xtask vm --nodes 2"
		return 1
		;;
	esac
	PEER=10.77.0.$((3 - SKY_NODE))
	$IP link set lo up
	$IP addr add 10.77.0."$SKY_NODE"/24 dev eth0 || return 1
	$IP link set eth0 up || return 1
	/usr/bin/rdma link add rxe0 type rxe netdev eth0 || return 1
	within 100 rdma_active 1 || { /usr/bin/rdma link show; return 1; }
	# A hang guard, not a bound: longer than xtask's boot limit (150 s),
	# so that a peer that hung while booting is booted again, with this
	# node, instead of this node giving up first (two TCG guests share
	# two host cores; a run once saw its peer silent past 60 s).
	seconds=0
	until ping -c 1 -W 1 "$PEER" >/dev/null 2>&1; do
		[ "$seconds" -ge 300 ] && { echo "rdma_node: no answer from $PEER in 300 s"; return 1; }
		seconds=$((seconds + 1))
	done
	echo "check rdma_node=$SKY_NODE"
}

# node_sync NAME: a barrier: returns once the peer node has come to its
# own `node_sync NAME` (at most 300 s), over TCP on the link (busybox nc,
# port 7399). Node 2 listens; node 1 connects until it is let in, says
# NAME and hears it answered. Node 2 checks the name, so two nodes at
# different steps fail there instead of going on out of step; a
# connection that brought no name (seen once: node 1's client gone
# before its line arrived), or the name of the barrier before (node 1
# retrying one whose answer it missed), is answered and waited past.
# Node 2 may give a second NAME node 1 may come to instead; the one it
# came to is then in NODE_SYNC_LAST.
NODE_SYNC_LAST=
node_sync() {
	if [ "$SKY_NODE" = 2 ]; then
		[ -x /tmp/node-sync-answer ] || {
			printf '#!/bin/sh\nread -r name\necho "$name" >/tmp/node-sync.got\necho "ok $name"\n' \
				>/tmp/node-sync-answer
			chmod +x /tmp/node-sync-answer
		}
		started=$(date +%s)
		while [ $(($(date +%s) - started)) -lt 300 ]; do
			: >/tmp/node-sync.got
			timeout 300 nc -l -p 7399 -e /tmp/node-sync-answer </dev/null >/dev/null 2>&1
			got=$(cat /tmp/node-sync.got)
			case $got in
			"$1" | "${2:-$1}")
				NODE_SYNC_LAST=$got
				return 0
				;;
			"" | "$NODE_SYNC_LAST") ;;
			*)
				echo "node_sync: node 2 at '$1${2:+ or $2}', node 1 at '$got'"
				return 1
				;;
			esac
		done
		echo "node_sync: node 1 never came to '$1'"
		return 1
	fi
	within 3000 node_sync_said "$1" || { echo "node_sync: node 2 never came to '$1'"; return 1; }
}

# node_sync_said NAME: node 1 said NAME to node 2 and heard it answered.
node_sync_said() {
	[ "$(echo "$1" | nc "$PEER" 7399 2>/dev/null)" = "ok $1" ]
}

# node_perf PORT TEST ARGS...: perftest across the link, the server on
# node 2, the client on node 1, each on its rxe0, on a port of the
# test's own (a client once met the listener of the test before, not yet
# gone, and was rejected as if no one listened); node 1 prints the
# client's output (bw_of, lat_of read it). Both ends are bounded.
# A connect the server's side rejected (RDMA_CM_EVENT_REJECTED, event 8 in
# perftest's other words; reason 8: no listener matched) although rdma
# showed it listening comes about once
# in ten two-node runs, and perftest then crashes; connecting again to
# the same server hung until the bound (a CI run). So both ends start
# over, a new server on a new port (PORT + 100 a try), up to three tries;
# node 1 tells node 2 through the barrier how its client ended. A client
# that could not calibrate its clock (perftest_clock_failed, once in about
# fifteen runs) starts over the same way. A server that served and then
# could not calibrate its own (ib_write_lat's server reports too) says
# so, `check NAME_server_clock_failed=1`: node 2 cannot ask node 1 to
# start over, and the client's report already shows the exchange done.
node_perf() {
	port=$1 name=$2
	shift 2
	try=1
	while :; do
		p=$((port + 100 * (try - 1)))
		if [ "$SKY_NODE" = 2 ]; then
			"$name" -R -d rxe0 -p "$p" "$@" >/tmp/"$name".server 2>&1 &
			server=$!
			listening "$p"
			node_sync "$name-$try" || return 1
			node_sync "$name-$try-done" "$name-$try-again" || return 1
			if [ "$NODE_SYNC_LAST" = "$name-$try-again" ]; then
				kill -9 "$server" 2>/dev/null
				wait "$server"
				try=$((try + 1))
				continue
			fi
			bounded "$server" 120
			rc=$?
			echo "check ${name}_server_exit=$rc"
			[ "$rc" = 0 ] || cat /tmp/"$name".server
			if [ "$rc" != 0 ] && perftest_clock_failed /tmp/"$name".server; then
				echo "check ${name}_server_clock_failed=1"
			fi
			return "$rc"
		fi
		node_sync "$name-$try" || return 1
		timeout 120 "$name" -R -d rxe0 -p "$p" "$@" "$PEER" >/tmp/"$name".client 2>&1
		rc=$?
		again=
		if [ "$rc" != 0 ] && [ "$try" -lt 3 ]; then
			if perftest_clock_failed /tmp/"$name".client; then
				again=clock_again
			elif grep -Eq 'RDMA_CM_EVENT_REJECTED|Unexpected CM event .* 8$' /tmp/"$name".client; then
				again=connect_again
			fi
		fi
		if [ -n "$again" ]; then
			echo "check ${name}_${again}=$try"
			cat /tmp/"$name".client
			node_sync "$name-$try-again" || return 1
			try=$((try + 1))
			continue
		fi
		node_sync "$name-$try-done" || return 1
		echo "check ${name}_exit=$rc"
		cat /tmp/"$name".client
		return "$rc"
	done
}
