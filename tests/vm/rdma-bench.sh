#!/bin/sh
# The queue between machines against perftest (cargo xtask bench-rdma):
# seed 002's experiment scaled to the VM. For each message size: perftest's
# ib_write_bw and ib_read_bw over the same soft-RoCE link (the ceiling),
# then the queue's push and pull through a queue of 4 fixed slots, the
# receiver computing a matrix product sized to the message between
# dequeues; then the 64-byte latency, ib_write_lat against the queue's
# enqueue-to-dequeue. 100 iterations per point, fewer where that would
# move more than BUDGET MiB (at least 5, as perftest asks). The sender
# enqueues several messages a call (a push sender's one chain: half the
# ring). perftest takes messages of at most 8 MiB: larger points are set
# against it at 8 MiB.
# Arguments: SIZES (bytes, comma-separated), BUDGET (MiB, default 32),
# COMPUTE: 1 (the receiver computes), 0 (it only dequeues: the queue's own
# cost, apart from the product's) or both, "1,0" (the default).
. ./lib.sh
sizes=${1:-64,1024,4096,65536,262144,1048576,4194304,33554432}
budget=$((${2:-32} * 1048576))
computes=$(echo "${3:-1,0}" | tr , ' ')
rdma_pair || exit 1
port=7500

# bench_queue MODE SIZE ITERS SENDER_ARGS [ARGS...]: one run of the
# queue; sets $rc and leaves each side's output in /tmp/b.MODE.send and
# /tmp/b.MODE.recv.
bench_queue() {
	mode=$1 size=$2 iters=$3 sender_args=$4
	shift 4
	port=$((port + 1))
	common="--mode $mode --entry-size $size --entries 4 --sizes $size --messages $iters --timeout 300"
	rm -f /tmp/b-"$mode"-recv /tmp/b-"$mode"-send
	# shellcheck disable=SC2086
	$NS_EXEC b sky-rdma-run /bin/sky-pvas-remote recv $common --listen 10.77.0.2:"$port" \
		--area /tmp/b-"$mode"-recv --fresh $compute_arg "$@" >/tmp/b."$mode".recv 2>&1 &
	receiver=$!
	listening "$port"
	# shellcheck disable=SC2086
	in_ns a sky-rdma-run /bin/sky-pvas-remote send $common --connect 10.77.0.2:"$port" \
		--area /tmp/b-"$mode"-send --fresh $sender_args "$@" >/tmp/b."$mode".send 2>&1
	rc=$?
	[ "$rc" = 0 ] || kill "$receiver"
	wait "$receiver"
	[ "$rc" = 0 ] || cat /tmp/b."$mode".send /tmp/b."$mode".recv
	rm -f /tmp/b-"$mode"-recv /tmp/b-"$mode"-send
}

# perf_bw TEST SIZE ITERS: perftest's average bandwidth, MiB/s (its check
# line and, if it failed, its output are printed).
perf_bw() {
	rdma_perf "$1" -s "$2" -n "$3" >/tmp/perf.out
	grep '^check' /tmp/perf.out
	if grep -q "^check ${1}_exit=0" /tmp/perf.out; then
		bw_of "$1" "$2"
	else
		tail -5 /tmp/perf.out
		echo
	fi
}

# ratio A B: A / B to two decimals ("-" if either is missing).
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'
}

for size in $(echo "$sizes" | tr , ' '); do
	iters=$((budget / size))
	[ "$iters" -gt 100 ] && iters=100
	[ "$iters" -lt 5 ] && iters=5
	perf_size=$size
	[ "$perf_size" -gt 8388608 ] && perf_size=8388608
	perf_iters=$((budget / perf_size))
	[ "$perf_iters" -gt 100 ] && perf_iters=100
	[ "$perf_iters" -lt 5 ] && perf_iters=5
	perf_bw ib_write_bw "$perf_size" "$perf_iters" >/tmp/perf.bw
	write_bw=$(tail -1 /tmp/perf.bw)
	sed '$d' /tmp/perf.bw
	perf_bw ib_read_bw "$perf_size" "$perf_iters" >/tmp/perf.bw
	read_bw=$(tail -1 /tmp/perf.bw)
	sed '$d' /tmp/perf.bw
	for compute in $computes; do
		compute_arg=
		[ "$compute" = 1 ] && compute_arg=--compute
		for mode in push pull; do
			bench_queue "$mode" "$size" "$iters" "--batch 8"
			echo "check bench_${mode}_${size}_${compute}_exit=$rc"
			got=$(sed -n 's/^ok done .*mb_per_s=\([0-9.]*\).*/\1/p' /tmp/b."$mode".send)
			eval "$mode=\$got"
		done
		# shellcheck disable=SC2154
		echo "result workload=rdma-bench compute=$compute bytes=$size iters=$iters" \
			"perf_bytes=$perf_size write_bw=$write_bw read_bw=$read_bw push=$push pull=$pull" \
			"push_of_write=$(ratio "$push" "$write_bw") pull_of_read=$(ratio "$pull" "$read_bw")" \
			"push_of_pull=$(ratio "$push" "$pull")"
	done
done

# Latency, 64 bytes: one message at a time, the sender waiting for each to
# be consumed; the receiver's enqueue-to-dequeue time (one clock: both
# namespaces are one VM's).
rdma_perf ib_write_lat -s 64 -n 100 | grep '^check'
write_lat=$(lat_of ib_write_lat 64)
for mode in push pull; do
	compute_arg=
	bench_queue "$mode" 64 100 "" --latency
	echo "check bench_${mode}_latency_exit=$rc"
	p50=$(sed -n 's/^ok latency .*p50_us=\([0-9]*\).*/\1/p' /tmp/b."$mode".recv)
	p99=$(sed -n 's/^ok latency .*p99_us=\([0-9]*\).*/\1/p' /tmp/b."$mode".recv)
	echo "result workload=rdma-bench-latency mode=$mode bytes=64 p50_us=$p50 p99_us=$p99" \
		"write_lat_us=$write_lat p50_of_write_lat=$(ratio "$p50" "$write_lat")"
done
true
