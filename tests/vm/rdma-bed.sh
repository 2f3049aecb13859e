#!/bin/sh
# The RDMA test bed in one guest: soft-RoCE on both ends of a veth pair
# between two network namespaces (lib.sh rdma_pair): the verbs the queue
# between machines is made of, through sky-rdma; the queue with counts
# placed by tagged plain WRITEs, through the C API, and against a hostile
# peer; and perftest, the ceiling the queue is measured against. The
# queue's own runs across a link (push and pull, resume after kills, link
# cuts, Device DAX) are rdma-nodes.sh's, between two guests.
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

shape="--entry-size 4096 --entries 16"
geometry="$shape --sizes 1,64,100,4096,777"

# plain MODE: the queue with counts placed by tagged plain WRITEs, as on a
# device without ATOMIC WRITE: the receiver (in b) alone asks, which
# decides for both. 200 messages of 1 B to the entry size, every byte
# checked by the receiver; the sender enqueues 4 a call (a push sender's
# one chain).
plain() {
	mode=$1
	label=$mode-plain
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode "$mode" --listen 10.77.0.2:7472 \
		--area /tmp/q-"$label"-recv --fresh $geometry --messages 200 --plain-counters \
		>/tmp/q."$label".recv 2>&1 &
	receiver=$!
	listening 7472
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:7472 \
		--area /tmp/q-"$label"-send --fresh $geometry --messages 200 --batch 4 \
		>/tmp/q."$label".send 2>&1
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
plain push
plain pull

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
