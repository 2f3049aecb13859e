#!/bin/sh
# The RDMA test bed: soft-RoCE on both ends of a veth pair between two
# network namespaces (lib.sh rdma_pair); the verbs the queue between
# machines is made of, through sky-rdma; and perftest: the ceiling the
# queue is measured against.
# Arguments: SIZE (bytes per perftest message, default 65536), ITERS
# (default 200).
. ./lib.sh

size=${1:-65536}
iters=${2:-200}
rdma_pair || exit 1

ibv_devinfo -d rxe_a | grep -e transport -e state -e active_mtu

# The queue's verbs through sky-rdma (sky-work rdma-verbs), run with the
# guest's rdma-core 56 (sky-rdma-run: its loader and libraries).
$NS_EXEC b sky-rdma-run /bin/sky-work rdma-verbs --listen 10.77.0.2:7471 >/tmp/verbs.server 2>&1 &
server=$!
listening 7471
in_ns a sky-rdma-run /bin/sky-work rdma-verbs --connect 10.77.0.2:7471 >/tmp/verbs.client 2>&1
echo "check verbs_client_exit=$?"
wait "$server"
echo "check verbs_server_exit=$?"
cat /tmp/verbs.client /tmp/verbs.server

# The persistent queue between machines, push then pull: 200 messages of
# 1 B to the entry size, every byte checked by the receiver (in b).
queue() {
	mode=$1
	shift
	# LABEL names the run (default: the mode); RECV_EXTRA goes to the
	# receiver only.
	label=${LABEL:-$mode}
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode "$mode" --listen 10.77.0.2:7472 \
		--area /tmp/q-"$label"-recv $RECV_EXTRA "$@" >/tmp/q."$label".recv 2>&1 &
	receiver=$!
	listening 7472
	in_ns a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:7472 \
		--area /tmp/q-"$label"-send "$@" >/tmp/q."$label".send 2>&1
	echo "check queue_${label}_send_exit=$?"
	wait "$receiver"
	echo "check queue_${label}_recv_exit=$?"
	cat /tmp/q."$label".send /tmp/q."$label".recv
	for side in send recv; do
		sed -n "s/^ok done /result workload=rdma-queue mode=$label side=$side /p" /tmp/q."$label".$side
		sed -n "s/^ok open .*counters=\([A-Za-z]*\).*/result workload=rdma-queue mode=$label side=$side counters=\1/p" \
			/tmp/q."$label".$side
	done
}
shape="--entry-size 4096 --entries 16"
geometry="$shape --sizes 1,64,100,4096,777"
for mode in push pull; do
	# shellcheck disable=SC2086
	queue "$mode" --fresh $geometry --messages 200
done
# Counts placed by tagged plain WRITEs, as on a device without ATOMIC
# WRITE: the receiver alone asks, which decides for both. The sender
# enqueues 4 messages a call (a push sender's one chain).
for mode in push pull; do
	# shellcheck disable=SC2086
	LABEL=$mode-plain RECV_EXTRA=--plain-counters queue "$mode" --fresh $geometry --messages 200 \
		--batch 4
done

# The C API (sky_pvas_queue_connect) against the Rust tool: a C sender
# pushes into a Rust receiver, a Rust sender into a C receiver's pull; 120
# messages each, every byte checked.
c_api() {
	mode=$1 port=$2
	c_args="$mode listen 10.77.0.2:$port"
	rust_args="--mode $mode --connect 10.77.0.2:$port $shape --sizes 1,64,100,4096,777 --messages 120"
	if [ "$mode" = push ]; then
		# shellcheck disable=SC2086
		$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode push \
			--listen 10.77.0.2:"$port" --area /tmp/qc-push-recv --fresh $shape \
			--sizes 1,64,100,4096,777 --messages 120 >/tmp/qc.push.recv 2>&1 &
		server=$!
		listening "$port"
		in_ns a sky-rdma-run /bin/sky-pvas-c-remote send push connect 10.77.0.2:"$port" - \
			120 4096 16 1,64,100,4096,777 >/tmp/qc.push.send 2>&1
		rc=$?
		echo "check c_push_send_exit=$rc"
	else
		# shellcheck disable=SC2086
		$NS_EXEC b sky-rdma-run /bin/sky-pvas-c-remote recv $c_args /tmp/qc-pull-recv \
			120 4096 16 1,64,100,4096,777 >/tmp/qc.pull.recv 2>&1 &
		server=$!
		listening "$port"
		# shellcheck disable=SC2086
		in_ns a sky-rdma-run /bin/sky-pvas-remote send $rust_args --area /tmp/qc-pull-send \
			--fresh >/tmp/qc.pull.send 2>&1
		rc=$?
		echo "check c_pull_send_exit=$rc"
	fi
	# A sender that failed leaves its receiver waiting for the rest.
	[ "$rc" = 0 ] || kill "$server"
	wait "$server"
	echo "check c_${mode}_recv_exit=$?"
	sed "s/^/c_api $mode: /" /tmp/qc."$mode".send /tmp/qc."$mode".recv
}
c_api push 7480
c_api pull 7481

# Resume: a fresh push queue; the receiver leaves after 80 messages and
# the sender is killed (SIGKILL) then, mid-stream; both start again as new
# processes, and the queue goes on from its durable state: the sender
# learns how many messages are in for good and sends the rest, the
# receiver takes message 81 next, up to 200, each once.
resume() {
	mode=$1
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode "$mode" --listen 10.77.0.2:7473 \
		--area /tmp/r-"$mode"-recv --fresh $geometry --messages 80 >/tmp/r1."$mode".recv 2>&1 &
	receiver=$!
	listening 7473
	# shellcheck disable=SC2086
	$NS_EXEC a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:7473 \
		--area /tmp/r-"$mode"-send --fresh $geometry --messages 200 >/tmp/r1."$mode".send 2>&1 &
	sender=$!
	# The receiver has taken its 80: the sender, blocked on a full ring
	# or sending, is killed.
	wait_line /tmp/r1."$mode".recv "ok took" "$receiver" 600
	kill -9 "$sender" 2>/dev/null
	wait "$sender" 2>/dev/null
	t0=$(date +%s)
	wait "$receiver"
	echo "check resume_${mode}_first_recv_exit=$?"
	echo "check resume_${mode}_receiver_exit_s=$(($(date +%s) - t0))"
	cat /tmp/r1."$mode".recv /tmp/r1."$mode".send
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode "$mode" --listen 10.77.0.2:7474 \
		--area /tmp/r-"$mode"-recv $geometry --messages 200 >/tmp/r2."$mode".recv 2>&1 &
	receiver=$!
	listening 7474
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:7474 \
		--area /tmp/r-"$mode"-send $geometry --messages 200 >/tmp/r2."$mode".send 2>&1
	echo "check resume_${mode}_send_exit=$?"
	wait "$receiver"
	echo "check resume_${mode}_recv_exit=$?"
	cat /tmp/r2."$mode".send /tmp/r2."$mode".recv
	sed -n "s/^ok open /result workload=rdma-resume mode=$mode side=send /p" /tmp/r2."$mode".send
	sed -n "s/^ok took /result workload=rdma-resume mode=$mode side=recv /p" /tmp/r2."$mode".recv
}
resume push
resume pull

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

# survive MODE HOW PORT [SECS]: 240 messages; once the receiver has
# applied 80, HOW happens: `kill`, the receiver is killed (SIGKILL) inside
# the dequeue of message 80, applied but not yet consumed for good, and
# started again as a new process; `link`, the link
# between the machines drops every packet both ways for SECS seconds
# (netem on each end: a network's loss, the sender's transmit succeeds)
# and comes back. Both sides open the queue again when their connection
# breaks (--retry-for) and go on from their durable state; the receiver
# records each message it applies (--applied): 1 to 240, each once, every
# byte checked.
survive() {
	mode=$1
	how=$2
	port=$3
	applied=/tmp/s-$mode-$how.applied
	rm -f "$applied"
	recv="recv --mode $mode --listen 10.77.0.2:$port --area /tmp/s-$mode-$how-recv $geometry --messages 240 --retry-for 30 --applied $applied"
	# The receiver holds message 80 (applied, not yet consumed for
	# good): until it is killed, or for 2 s while the link is cut, so
	# the cut falls mid-stream (the sender has filled the ring and waits).
	hold="--hold-in-take 80"
	[ "$how" = link ] && hold="$hold --hold-for 2"
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote $recv --fresh $hold >/tmp/s1."$mode.$how".recv 2>&1 &
	receiver=$!
	listening "$port"
	# shellcheck disable=SC2086
	$NS_EXEC a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:"$port" \
		--area /tmp/s-"$mode-$how"-send --fresh $geometry --messages 240 --retry-for 30 \
		>/tmp/s."$mode.$how".send 2>&1 &
	sender=$!
	wait_line /tmp/s1."$mode.$how".recv "^ok holding 80" "$receiver" 300
	case $how in
	kill)
		kill -9 "$receiver"
		wait "$receiver" 2>/dev/null
		# shellcheck disable=SC2086
		$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote $recv >/tmp/s2."$mode.$how".recv 2>&1 &
		receiver=$!
		;;
	link)
		# Packets dropped, the link itself left up: taking a veth down
		# (or a local queue that refuses packets) leaves soft-RoCE's CM
		# queue pair (QP1) in the error state for good on this kernel,
		# so no new connection forms on the device again: a defect of
		# rxe that real NICs do not share.
		in_ns a /usr/sbin/tc qdisc add dev veth_a root netem loss 100%
		in_ns b /usr/sbin/tc qdisc add dev veth_b root netem loss 100%
		sleep "$4"
		in_ns a /usr/sbin/tc qdisc del dev veth_a root
		in_ns b /usr/sbin/tc qdisc del dev veth_b root
		;;
	esac
	bounded "$sender" 120
	echo "check survive_${mode}_${how}_send_exit=$?"
	bounded "$receiver" 60
	echo "check survive_${mode}_${how}_recv_exit=$?"
	echo "check survive_${mode}_${how}_applied_once=$(applied_once "$applied" 240)"
	echo "check survive_${mode}_${how}_reopened=$(cat /tmp/s*."$mode.$how".* | grep -c '^ok reopen')"
	echo "check survive_${mode}_${how}_again=$(sed -n 's/^ok applied .*(again=\([0-9]*\)).*/\1/p' /tmp/s*."$mode.$how".recv | tail -1)"
	cat /tmp/s*."$mode.$how".*
}
survive push kill 7475
survive pull kill 7476
# A second: RC's retries ride it out. Twelve: every work request waits
# past its 10 s limit, both sides break and reconnect once it is back.
survive push link 7477 1
survive pull link 7478 12

# The push receiver's area on persistent memory RDMA may pin (a Device
# DAX namespace on the emulated NVDIMM): the sender FLUSHes each entry to
# persistence (rxe writes the range back from the CPU caches). 100
# messages, then both sides start again as new processes and the queue
# goes on from what the namespace holds: 101 to 150. Then pull, with the
# sender's area there.
devdax() {
	pmem_devdax || return 1
	for round in 1 2; do
		fresh=
		[ "$round" = 1 ] && fresh=--fresh
		n=$((50 + 50 * round))
		# shellcheck disable=SC2086
		$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode push --listen 10.77.0.2:7481 \
			--area /dev/dax0.0 $fresh $geometry --messages $n >/tmp/d$round.recv 2>&1 &
		receiver=$!
		listening 7481
		# shellcheck disable=SC2086
		in_ns a sky-rdma-run /bin/sky-pvas-remote send --mode push --connect 10.77.0.2:7481 \
			$geometry --messages $n >/tmp/d$round.send 2>&1
		echo "check devdax_push${round}_send_exit=$?"
		bounded "$receiver" 60
		echo "check devdax_push${round}_recv_exit=$?"
		cat /tmp/d$round.send /tmp/d$round.recv
		sed -n "s/^ok open /result workload=rdma-devdax round=$round side=send /p" /tmp/d$round.send
		sed -n "s/^ok took /result workload=rdma-devdax round=$round side=recv /p" /tmp/d$round.recv
	done
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote send --mode pull --listen 10.77.0.2:7482 \
		--area /dev/dax0.0 --fresh $geometry --messages 60 >/tmp/dp.send 2>&1 &
	sender=$!
	listening 7482
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-remote recv --mode pull --connect 10.77.0.2:7482 \
		--area /tmp/dp-recv --fresh $geometry --messages 60 >/tmp/dp.recv 2>&1
	echo "check devdax_pull_recv_exit=$?"
	bounded "$sender" 60
	echo "check devdax_pull_send_exit=$?"
	cat /tmp/dp.send /tmp/dp.recv
	sed -n "s/^ok open /result workload=rdma-devdax round=pull side=send /p" /tmp/dp.send
}
devdax

# A hostile peer (sky-pvas-hostile: well-formed hellos, then garbage): it
# writes garbage into a push receiver's ring and counter word, and places
# impossible consumed counts into a pull sender's; the honest end refuses
# with the reason. It then reaches beyond its grant (a READ of a push
# receiver's ring, a WRITE into a pull sender's): the honest end's NIC
# refuses. Nothing the honest end held durably is lost: an honest peer
# then finishes the queue, every message applied once.
hostile() {
	mode=$1
	port=$2
	applied=/tmp/h-$mode.applied
	rm -f "$applied"
	if [ "$mode" = push ]; then
		owner="recv --mode push --listen 10.77.0.2:$port --area /tmp/h-push-recv $geometry --messages 40 --applied $applied --retry-for 30"
		honest="send --mode push --connect 10.77.0.2:$port $geometry --retry-for 30"
		bad="send --mode push --connect 10.77.0.2:$port $shape"
	else
		owner="send --mode pull --listen 10.77.0.2:$port --area /tmp/h-pull-send $geometry --messages 40 --retry-for 30"
		honest="recv --mode pull --connect 10.77.0.2:$port --area /tmp/h-pull-recv $geometry --applied $applied --retry-for 30"
		bad="recv --mode pull --connect 10.77.0.2:$port --area /tmp/h-pull-bad $shape"
	fi
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote $owner --fresh >/tmp/h1."$mode" 2>&1 &
	victim=$!
	listening "$port"
	if [ "$mode" = push ]; then
		# shellcheck disable=SC2086
		in_ns a sky-rdma-run /bin/sky-pvas-remote $honest --messages 20 >/tmp/h0."$mode" 2>&1
		# The receiver has applied 20; the sender left: it listens again.
		wait_line /tmp/h1."$mode" "^ok reopen" "$victim" 300
		listening "$port"
	fi
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-hostile $bad --act scribble >/tmp/h2."$mode" 2>&1
	echo "check hostile_${mode}_scribble_exit=$?"
	cat /tmp/h0."$mode" /tmp/h2."$mode" 2>/dev/null
	bounded "$victim" 60
	echo "check hostile_${mode}_victim_exit=$?"
	echo "check hostile_${mode}_refused=$(grep -c "^error: the remote peer broke the queue's protocol" /tmp/h1."$mode")"
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote $owner >/tmp/h3."$mode" 2>&1 &
	victim=$!
	listening "$port"
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-hostile $bad --act reach >/tmp/h4."$mode" 2>&1
	echo "check hostile_${mode}_reach_exit=$?"
	cat /tmp/h1."$mode" /tmp/h4."$mode"
	echo "check hostile_${mode}_reach_refused=$(grep -c '^ok refused: .*remote access error' /tmp/h4."$mode")"
	# The honest end's connection broke with it: it listens again.
	wait_line /tmp/h3."$mode" "^ok reopen" "$victim" 300
	listening "$port"
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-remote $honest --messages 40 >/tmp/h5."$mode" 2>&1
	echo "check hostile_${mode}_honest_exit=$?"
	bounded "$victim" 60
	echo "check hostile_${mode}_victim_again_exit=$?"
	echo "check hostile_${mode}_applied_once=$(applied_once "$applied" 40)"
	cat /tmp/h3."$mode" /tmp/h5."$mode"
}
hostile push 7479
hostile pull 7480

rdma_perf ib_write_bw -s "$size" -n "$iters" &&
	echo "result workload=perftest test=ib_write_bw bytes=$size mb_per_s=$(bw_of ib_write_bw "$size")"
rdma_perf ib_read_bw -s "$size" -n "$iters" &&
	echo "result workload=perftest test=ib_read_bw bytes=$size mb_per_s=$(bw_of ib_read_bw "$size")"
rdma_perf ib_write_lat -s 64 -n 100 &&
	echo "result workload=perftest test=ib_write_lat bytes=64 typical_us=$(lat_of ib_write_lat 64)"
true
