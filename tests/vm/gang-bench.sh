# Seed 003's experiment (docs/seeds.md) in one boot, a benchmark, not a
# test: 1, 2 and 4 memory-bound gangs of 3 threads (`sky-work gang`, a
# dependent random walk over 8 MiB shared by its threads) on two cache
# domains, ${1:-10} s per placement:
#   all-share      pinned by hand: each gang's threads in one domain, gangs
#                  dealt to the domains in turn
#   partial-share  pinned by hand: each gang's threads spread over both
#                  domains, so every domain holds every gang
#   eevdf          the kernel's scheduler
#   sky            scx_sky with a class hint (`mb-*` is memory-bound)
# Prints, for each, the loads per second summed over the gangs and as a
# ratio to all-share's in this boot, and from the tracepoint observer the
# share of the time two or more of a gang's threads ran that all ran in
# one domain (All share) and the share of domain time a domain ran two
# gangs at once (Dirty).
#
# TCG models no cache: a load costs the same wherever it runs, so in the
# VM only the placement columns mean anything (the paper measured CPI 0.5
# under All share and 3.2 under Partial share, up to 5.4x throughput). On
# a machine with two or more LLCs, run it natively as root with PATH
# holding target/release, and a buffer bigger than one LLC's share:
#   GANG_BENCH_MB=64 sh tests/vm/gang-bench.sh 30
. ./lib.sh
secs=${1:-10}
mb=${GANG_BENCH_MB:-8}
out=/tmp/gang-bench-out
mkdir -p "$out"
named_work /tmp/gang-bin mb-a mb-b mb-c mb-d

# expand LIST: "0-3,8" -> "0 1 2 3 8"
expand() {
	echo "$1" | tr ',' '\n' | while IFS=- read -r lo hi; do
		seq "$lo" "${hi:-$lo}"
	done | tr '\n' ' '
}
last=$(($(nproc) - 1))
dom0=$(expand "$(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list)")
dom1=$(expand "$(cat /sys/devices/system/cpu/cpu$last/cache/index3/shared_cpu_list)")
if [ "$dom0" = "$dom1" ]; then
	echo "check gang_bench_needs=two cache domains, found one: $dom0"
	exit 1
fi

# nth N WORDS...: the Nth word (from 0, wrapping around).
nth() {
	n=$1
	shift
	eval "echo \${$((n % $# + 1))}"
}

# pins PLACEMENT GANG: the CPU list for gang GANG's 3 walkers.
pins() {
	case "$1" in
	all-share)
		# shellcheck disable=SC2086
		if [ $(($2 % 2)) = 0 ]; then set -- $2 $dom0; else set -- $2 $dom1; fi
		g=$1
		shift
		off=$((g / 2 * 3))
		echo "$(nth $off "$@"),$(nth $((off + 1)) "$@"),$(nth $((off + 2)) "$@")"
		;;
	partial-share)
		# shellcheck disable=SC2086
		echo "$(nth $2 $dom0),$(nth $2 $dom1),$(nth $(($2 + 1)) $dom0)"
		;;
	*) echo "" ;;
	esac
}

# run_one GANGS PLACEMENT
run_one() {
	start_trace
	pids=
	i=0
	for g in a b c d; do
		[ "$i" -ge "$1" ] && break
		p=$(pins "$2" "$i")
		"/tmp/gang-bin/mb-$g" gang --threads 3 --mb "$mb" --seconds "$secs" ${p:+--cpus "$p"} >"$out/$i" &
		pids="$pids $!"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	wait $pids
	stop_trace >"$out/trace"
	loads=$(cat "$out"/[0-9] | sed -n 's/.*loads_per_s=\([0-9.]*\).*/\1/p' |
		awk '{s += $1} END {printf "%.0f", s}')
	all=$(sed -n 's/.*observer=trace gangs .* all_share=\([0-9.]*\).*/\1/p' "$out/trace")
	dirty=$(sed -n 's/.*observer=trace gangs .* dirty_share=\([0-9.]*\).*/\1/p' "$out/trace")
	rm -f "$out"/[0-9]
	echo "result gang-bench gangs=$1 placement=$2 loads_per_s=$loads all_share=${all:-?} dirty_share=${dirty:-?}"
}

echo "gang-bench date=$(date -u +%Y-%m-%d) kernel=$(uname -r) seconds=$secs mb=$mb domains=$(echo $dom0 | tr ' ' ,)/$(echo $dom1 | tr ' ' ,)"
: >"$out/results"
for n in 1 2 4; do
	for placement in all-share partial-share eevdf; do
		run_one "$n" "$placement" | tee -a "$out/results"
	done
done
start_sky --stats-interval 0 --class 'mb-*=memory-bound' || exit 1
for n in 1 2 4; do
	run_one "$n" sky | tee -a "$out/results"
done
echo "check state_after_sky=$(state)"
stop_sky >/dev/null

# The table: loads/s as a ratio to the pinned All share of as many gangs.
echo
echo "| gangs | placement | loads/s | vs all-share | All share | Dirty |"
echo "| --- | --- | --- | --- | --- | --- |"
awk '{
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	if (f["placement"] == "all-share") base[f["gangs"]] = f["loads_per_s"]
	row[NR] = $0
}
END {
	for (r = 1; r <= NR; r++) {
		n = split(row[r], w, " ")
		for (i = 1; i <= n; i++) { split(w[i], kv, "="); f[kv[1]] = kv[2] }
		b = base[f["gangs"]]
		printf "| %s | %s | %s | %.2f | %s | %s |\n", f["gangs"], f["placement"],
			f["loads_per_s"], (b > 0 ? f["loads_per_s"] / b : 0), f["all_share"], f["dirty_share"]
	}
}' "$out/results" | sort -t'|' -k2,2n -s
echo "TCG models no cache: only the placement columns (All share, Dirty) are meaningful in a VM."
report_dmesg
