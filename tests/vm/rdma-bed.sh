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
in_ns b sky-rdma-run /bin/sky-work rdma-verbs --listen 10.77.0.2:7471 >/tmp/verbs.server 2>&1 &
server=$!
sleep 1
in_ns a sky-rdma-run /bin/sky-work rdma-verbs --connect 10.77.0.2:7471 >/tmp/verbs.client 2>&1
echo "check verbs_client_exit=$?"
wait "$server"
echo "check verbs_server_exit=$?"
cat /tmp/verbs.client /tmp/verbs.server

# perftest: the server in b, the client in a, over RDMA CM (-R), one run
# each; bandwidth in MB/s, latency in microseconds.
perf() {
	name=$1
	shift
	in_ns b "$name" -R -d rxe_b "$@" >/tmp/"$name".server 2>&1 &
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
