#!/bin/sh
# The RDMA test bed: soft-RoCE on both ends of a veth pair between two
# network namespaces (lib.sh rdma_pair); the verbs the queue between
# machines is made of, through sky-rdma; and perftest: the ceiling the
# queue is measured against.
# Arguments: SIZE (bytes per perftest message, default 65536), ITERS
# (default 200).
. ./lib.sh
# For processes started in the background: `ip netns exec` execs the
# command (as sky-rdma-run does), so $! is the program itself and a kill
# reaches it (a shell function would run in a subshell of its own).
NS_EXEC="/usr/sbin/ip netns exec"

# listening PORT: waits (at most 30 s) until an RDMA CM id listens on
# PORT, so a client never connects before its server (a fixed sleep did
# not allow for a slow start under TCG).
listening() {
	tenths=0
	until /usr/bin/rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 "; do
		[ "$tenths" -ge 300 ] && { echo "no listener on port $1"; return 1; }
		sleep 0.1
		tenths=$((tenths + 1))
	done
}
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
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv --mode "$mode" --listen 10.77.0.2:7472 \
		--area /tmp/q-"$mode"-recv "$@" >/tmp/q."$mode".recv 2>&1 &
	receiver=$!
	listening 7472
	in_ns a sky-rdma-run /bin/sky-pvas-remote send --mode "$mode" --connect 10.77.0.2:7472 \
		--area /tmp/q-"$mode"-send "$@" >/tmp/q."$mode".send 2>&1
	echo "check queue_${mode}_send_exit=$?"
	wait "$receiver"
	echo "check queue_${mode}_recv_exit=$?"
	cat /tmp/q."$mode".send /tmp/q."$mode".recv
	for side in send recv; do
		sed -n "s/^ok done /result workload=rdma-queue mode=$mode side=$side /p" /tmp/q."$mode".$side
	done
}
geometry="--entry-size 4096 --entries 16 --sizes 1,64,100,4096,777"
for mode in push pull; do
	# shellcheck disable=SC2086
	queue "$mode" --fresh $geometry --messages 200
done

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

# perftest: the server in b, the client in a, over RDMA CM (-R), one run
# each; bandwidth in MB/s, latency in microseconds.
perf() {
	name=$1
	shift
	$NS_EXEC b "$name" -R -d rxe_b "$@" >/tmp/"$name".server 2>&1 &
	server=$!
	sleep 1
	in_ns a "$name" -R -d rxe_a "$@" 10.77.0.2 >/tmp/"$name".client 2>&1
	rc=$?
	wait "$server"
	echo "check ${name}_exit=$rc"
	[ "$rc" = 0 ] || { cat /tmp/"$name".client /tmp/"$name".server; return 1; }
	cat /tmp/"$name".client
}
# Bandwidth lines: "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]".
bw_of() {
	awk -v s="$2" '$1 == s && NF >= 4 { print $4 }' /tmp/"$1".client | tail -1
}
perf ib_write_bw -s "$size" -n "$iters" &&
	echo "result workload=perftest test=ib_write_bw bytes=$size mb_per_s=$(bw_of ib_write_bw "$size")"
perf ib_read_bw -s "$size" -n "$iters" &&
	echo "result workload=perftest test=ib_read_bw bytes=$size mb_per_s=$(bw_of ib_read_bw "$size")"
# Latency lines: "#bytes #iterations t_min t_max t_typical t_avg ...".
perf ib_write_lat -s 64 -n 100 &&
	echo "result workload=perftest test=ib_write_lat bytes=64 typical_us=$(awk '$1 == 64 && NF >= 5 { print $5 }' /tmp/ib_write_lat.client | tail -1)"
true
