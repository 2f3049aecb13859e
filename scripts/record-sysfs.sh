#!/bin/sh
# Records this machine's CPU and NUMA topology as sysfs shows it: the
# files sky-topology and scx_utils read, copied under OUT_DIR with their
# paths (OUT_DIR/sys/devices/system/...). The tree is what
# SCX_SYSFS_PREFIX takes, and what the machine_shapes test checks when
# its parent directory is SKY_RECORDED_TREES:
#
#   scripts/record-sysfs.sh trees/my-machine
#   SKY_RECORDED_TREES=trees cargo test --release -p sky-topology \
#       --test machine_shapes -- --ignored recorded --nocapture
#
# Nothing is read but /sys/devices/system/{cpu,node}; no root needed.
set -eu

out=${1:?usage: record-sysfs.sh OUT_DIR}
if [ -e "$out/sys" ]; then
	echo "record-sysfs.sh: $out/sys exists already; give a new directory" >&2
	exit 2
fi

for top in /sys/devices/system/cpu /sys/devices/system/node; do
	[ -d "$top" ] || continue
	# Device plumbing (power, uevent, driver links) and per-CPU state
	# machines (cpuidle, hotplug) say nothing about the shape.
	find "$top" \( -name power -o -name uevent -o -name driver \
		-o -name subsystem -o -name firmware_node -o -name cpuidle \
		-o -name hotplug -o -name microcode -o -name hugepages \
		-o -name 'memory[0-9]*' -o -name vulnerabilities \) -prune \
		-o \( -type f -o -type l \) -print |
		while IFS= read -r path; do
			dest="$out$path"
			mkdir -p "$(dirname "$dest")"
			if [ -L "$path" ]; then
				# node/nodeN/cpuM point back into cpu/: kept as links.
				ln -s "$(readlink "$path")" "$dest"
			elif ! cat "$path" >"$dest" 2>/dev/null; then
				# Write-only and refusing attributes are not topology.
				rm -f "$dest"
			fi
		done
done
files=$(find "$out/sys" -type f | wc -l)
if [ "$files" -eq 0 ]; then
	echo "record-sysfs.sh: nothing readable under /sys/devices/system" >&2
	exit 1
fi
echo "record-sysfs.sh: $files files of $(uname -r) ($(nproc --all) CPUs) under $out"
