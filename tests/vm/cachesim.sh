# The cache model's known answers (tests/eval.rs): strided sweeps, each one
# marked phase, sized to fit a level or to overflow it; some warmed on
# another CPU, to show which caches two CPUs share. No scheduler of the
# project is involved (EEVDF). Each sweep's result line says the CPUs and
# how many loads it made; the guest's own view of its topology is printed
# for the test to hold the model's vCPU numbering against.
#
#   arguments   sweeps as KB:STRIDE:PASSES:CPU[:WARM_CPU]
. ./lib.sh

for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
	echo "check $(basename "$cpu")_core=$(cat "$cpu/topology/core_id")" \
		"$(basename "$cpu")_package=$(cat "$cpu/topology/physical_package_id")"
done
for sweep in "$@"; do
	IFS=: read -r kb stride passes cpu warm <<EOS
$sweep
EOS
	sky-work cache-sweep --kb "$kb" --stride "$stride" --passes "$passes" \
		--cpu "$cpu" --warm-cpu "${warm:-$cpu}" || exit 1
done
echo "check sweeps=$#"
