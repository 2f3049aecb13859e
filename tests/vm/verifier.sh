# What each of scx_sky's BPF programs costs the kernel's verifier as it
# loads (`scx_sky --verifier-stats`: instructions processed, total and
# peak states, veristat's figures), on this kernel and topology; tests/verifier.rs
# holds them against tests/verifier-baseline.txt.
. ./lib.sh
echo "check kernel=$(uname -r)"
start_sky --verifier-stats --stats-interval 0 || exit 1
stop_sky
report_dmesg
