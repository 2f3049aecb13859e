#!/bin/sh
# The queue between two machines: two guests (cargo xtask vm --nodes 2),
# each with its own kernel, soft-RoCE device on one virtio-net link, and
# emulated NVDIMM. Node 2 (10.77.0.2) is the listening end, node 1 the
# connecting one, as namespaces b and a of rdma-bed.sh, which checks the
# same protocol inside one guest; here every message crosses the link
# between two kernels. Both nodes run this script: each step begins at a
# barrier (lib.sh node_sync), and each node prints the checks of its side.
# Arguments: SIZE (bytes per perftest message, default 65536).
. ./lib.sh

size=${1:-65536}
rdma_node || exit 1
ibv_devinfo -d rxe0 | grep -e transport -e state -e active_mtu

B=10.77.0.2
shape="--entry-size 4096 --entries 16"
geometry="$shape --sizes 1,64,100,4096,777"
# The queue's tool with the guest's rdma-core; sky-rdma-run execs it, so
# $! of a background start is the tool itself.
REMOTE="sky-rdma-run /bin/sky-pvas-remote"

# serve PORT OUT ARGS...: node 2 starts the tool listening on PORT (its
# output in OUT) and waits until it listens; its pid in $served (sh has
# no locals: its variables are named apart from its callers').
serve() {
	serve_port=$1 serve_out=$2
	shift 2
	# shellcheck disable=SC2086
	$REMOTE "$@" --listen $B:"$serve_port" >"$serve_out" 2>&1 &
	served=$!
	listening "$serve_port"
}

# serve_step STEP PORT OUT ARGS...: node 2's side of a step: serve, meet
# node 1 at the barrier STEP, then wait (at most 300 s) for the tool; its
# status.
serve_step() {
	step=$1
	shift
	serve "$@"
	node_sync "$step" || return 1
	bounded "$served" 300
}

# queue MODE PORT: 200 messages of 1 B to the entry size across the
# link, every byte checked by node 2's receiver.
queue() {
	mode=$1 port=$2
	if [ "$SKY_NODE" = 2 ]; then
		# shellcheck disable=SC2086
		serve_step "queue-$mode" "$port" /tmp/q.$mode recv --mode "$mode" \
			--area /tmp/q-$mode-recv --fresh $geometry --messages 200
		echo "check queue_${mode}_recv_exit=$?"
		side=recv
	else
		node_sync "queue-$mode" || return 1
		# shellcheck disable=SC2086
		$REMOTE send --mode "$mode" --connect $B:"$port" --area /tmp/q-$mode-send --fresh \
			$geometry --messages 200 >/tmp/q.$mode 2>&1
		echo "check queue_${mode}_send_exit=$?"
		side=send
	fi
	cat /tmp/q.$mode
	sed -n "s/^ok done /result workload=rdma-queue mode=$mode side=$side /p" /tmp/q.$mode
	sed -n "s/^ok open .*counters=\([A-Za-z]*\).*/result workload=rdma-queue mode=$mode side=$side counters=\1/p" \
		/tmp/q.$mode
}
queue push 7472
queue pull 7473

# resume MODE PORT: node 2's receiver leaves after 80 messages and node
# 1's sender is killed (SIGKILL) then, mid-stream; both start again as new
# processes and go on from their durable state: the receiver takes 81 to
# 200, each once.
resume() {
	mode=$1 port=$2
	if [ "$SKY_NODE" = 2 ]; then
		# shellcheck disable=SC2086
		serve_step "resume-$mode-1" "$port" /tmp/r1.$mode recv --mode "$mode" \
			--area /tmp/r-$mode-recv --fresh $geometry --messages 80
		echo "check resume_${mode}_first_recv_exit=$?"
		node_sync "resume-$mode-took" || return 1
		# shellcheck disable=SC2086
		serve_step "resume-$mode-2" $((port + 1)) /tmp/r2.$mode recv --mode "$mode" \
			--area /tmp/r-$mode-recv $geometry --messages 200
		echo "check resume_${mode}_recv_exit=$?"
		cat /tmp/r1.$mode /tmp/r2.$mode
		sed -n "s/^ok took /result workload=rdma-resume mode=$mode side=recv /p" /tmp/r2.$mode
		return
	fi
	node_sync "resume-$mode-1" || return 1
	# shellcheck disable=SC2086
	$REMOTE send --mode "$mode" --connect $B:"$port" --area /tmp/r-$mode-send --fresh $geometry \
		--messages 200 >/tmp/r1.$mode 2>&1 &
	sender=$!
	# Node 2's receiver has taken its 80 and left.
	node_sync "resume-$mode-took" || return 1
	kill -9 "$sender" 2>/dev/null
	wait "$sender" 2>/dev/null
	node_sync "resume-$mode-2" || return 1
	# shellcheck disable=SC2086
	$REMOTE send --mode "$mode" --connect $B:$((port + 1)) --area /tmp/r-$mode-send $geometry \
		--messages 200 >/tmp/r2.$mode 2>&1
	echo "check resume_${mode}_send_exit=$?"
	cat /tmp/r1.$mode /tmp/r2.$mode
	sed -n "s/^ok open /result workload=rdma-resume mode=$mode side=send /p" /tmp/r2.$mode
}
resume push 7474
resume pull 7476

# cut SECS: this node drops every packet it sends for SECS seconds (netem:
# a network's loss, the link itself left up, as rdma-bed.sh cuts it);
# both nodes cut at once, so nothing crosses either way.
cut() {
	/usr/sbin/tc qdisc add dev eth0 root netem loss 100%
	sleep "$1"
	/usr/sbin/tc qdisc del dev eth0 root
}

# survive MODE HOW PORT [SECS]: 240 messages; once node 2's receiver has
# applied 80, HOW happens: `kill`, the receiver is killed inside the
# dequeue of message 80 and started again as a new process; `link`, the
# link drops everything both ways for SECS seconds. Both sides open the
# queue again (--retry-for) from their durable state; the receiver
# records what it applies: 1 to 240, each once.
survive() {
	mode=$1 how=$2 port=$3 secs=$4
	out=/tmp/s.$mode.$how
	if [ "$SKY_NODE" = 2 ]; then
		applied=/tmp/s-$mode-$how.applied
		recv="recv --mode $mode --area /tmp/s-$mode-$how-recv $geometry --messages 240 --retry-for 30 --applied $applied"
		hold="--hold-in-take 80"
		[ "$how" = link ] && hold="$hold --hold-for 2"
		# shellcheck disable=SC2086
		serve "$port" $out.1 $recv --fresh $hold
		node_sync "survive-$mode-$how" || return 1
		wait_line $out.1 "^ok holding 80" "$served" 600 || return 1
		if [ "$how" = kill ]; then
			kill -9 "$served"
			wait "$served" 2>/dev/null
			# shellcheck disable=SC2086
			$REMOTE $recv --listen $B:"$port" >$out.2 2>&1 &
			served=$!
		else
			node_sync "cut-$mode" || return 1
			cut "$secs"
		fi
		bounded "$served" 120
		echo "check survive_${mode}_${how}_recv_exit=$?"
		echo "check survive_${mode}_${how}_applied_once=$(applied_once "$applied" 240)"
		echo "check survive_${mode}_${how}_again=$(sed -n 's/^ok applied .*(again=\([0-9]*\)).*/\1/p' $out.* | tail -1)"
		side=recv
	else
		node_sync "survive-$mode-$how" || return 1
		# shellcheck disable=SC2086
		$REMOTE send --mode "$mode" --connect $B:"$port" --area /tmp/s-$mode-$how-send --fresh \
			$geometry --messages 240 --retry-for 30 >$out.1 2>&1 &
		sender=$!
		if [ "$how" = link ]; then
			node_sync "cut-$mode" || return 1
			cut "$secs"
		fi
		bounded "$sender" 120
		echo "check survive_${mode}_${how}_send_exit=$?"
		side=send
	fi
	echo "check survive_${mode}_${how}_${side}_reopened=$(cat $out.* | grep -c '^ok reopen')"
	cat $out.*
}
survive push kill 7477
survive pull kill 7478
# A second: RC's retries ride it out. Twelve: every work request waits
# past its 10 s limit, both sides break and reconnect once it is back.
survive push link 7479 1
survive pull link 7480 12

# Each node's NVDIMM as a Device DAX namespace, as in the paper: node 2's
# holds the push receiver's area (100 messages, then both sides start
# again as new processes and go on from what it holds: 101 to 150) and
# then a pull sender's; node 1's the pull receiver's.
devdax() {
	pmem_devdax || return 1
	for round in 1 2; do
		fresh=
		[ "$round" = 1 ] && fresh=--fresh
		n=$((50 + 50 * round))
		if [ "$SKY_NODE" = 2 ]; then
			# shellcheck disable=SC2086
			serve_step "devdax-$round" 7481 /tmp/d$round recv --mode push --area /dev/dax0.0 \
				$fresh $geometry --messages $n
			echo "check devdax_push${round}_recv_exit=$?"
			sed -n "s/^ok took /result workload=rdma-devdax round=$round side=recv /p" /tmp/d$round
		else
			node_sync "devdax-$round" || return 1
			# shellcheck disable=SC2086
			$REMOTE send --mode push --connect $B:7481 $geometry --messages $n >/tmp/d$round 2>&1
			echo "check devdax_push${round}_send_exit=$?"
			sed -n "s/^ok open /result workload=rdma-devdax round=$round side=send /p" /tmp/d$round
		fi
		cat /tmp/d$round
	done
	if [ "$SKY_NODE" = 2 ]; then
		# shellcheck disable=SC2086
		serve_step devdax-pull 7482 /tmp/dp send --mode pull --area /dev/dax0.0 --fresh \
			$geometry --messages 60
		echo "check devdax_pull_send_exit=$?"
		side=send
	else
		node_sync devdax-pull || return 1
		# shellcheck disable=SC2086
		$REMOTE recv --mode pull --connect $B:7482 --area /dev/dax0.0 --fresh $geometry \
			--messages 60 >/tmp/dp 2>&1
		echo "check devdax_pull_recv_exit=$?"
		side=recv
	fi
	cat /tmp/dp
	sed -n "s/^ok open /result workload=rdma-devdax round=pull side=$side /p" /tmp/dp
}
devdax

# perftest across the link: the ceiling the queue is measured against.
if node_perf 7491 ib_write_bw -s "$size" -n 200 && [ "$SKY_NODE" = 1 ]; then
	echo "result workload=perftest test=ib_write_bw bytes=$size mb_per_s=$(bw_of ib_write_bw "$size")"
fi
if node_perf 7492 ib_read_bw -s "$size" -n 200 && [ "$SKY_NODE" = 1 ]; then
	echo "result workload=perftest test=ib_read_bw bytes=$size mb_per_s=$(bw_of ib_read_bw "$size")"
fi
if node_perf 7493 ib_write_lat -s 64 -n 100 && [ "$SKY_NODE" = 1 ]; then
	echo "result workload=perftest test=ib_write_lat bytes=64 typical_us=$(lat_of ib_write_lat 64)"
fi
# Both leave together: a node that ended first would be gone while its
# peer still needed it.
node_sync end
