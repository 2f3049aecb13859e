#!/usr/bin/env bash
# Installs everything scx_sky needs to build and to boot its test VM on a
# Debian 12 (bookworm) machine. Idempotent: a second run only checks.
# `setup.sh --build` installs only what building needs (the first five
# below and cmake), asking sudo for it if not root: `cargo xtask install`
# runs that.
#
#   - clang-19/llvm-19 from bookworm (scx_cargo needs clang >= 18 for BPF),
#     and clang-format-19 (the BPF C's kernel style, bpf/.clang-format)
#   - libelf/zlib/zstd headers for libbpf-sys, pkg-config
#   - qemu-system-x86 and a static busybox for the VM test bed
#   - DejaVu fonts for the evaluation's plots
#   - systemd, dbus and polkitd: `systemd-analyze verify` of the service
#     unit the install writes (tests/install.rs), a private bus for the
#     D-Bus service's tests, and the guest that boots this machine's
#     systemd with the system bus and polkitd (tests/service.rs); nothing
#     is started on this machine
#   - cmake, to build rdma-mummy-sys (sky-rdma's binding: rdma-core's
#     headers and a shim that loads libibverbs at run time)
#   - iproute2 (`ip`, `rdma`) for the VM's soft-RoCE test bed; its rdma-core
#     and perftest come from Debian trixie through a private apt state in
#     the cache (xtask/src/guest_tools.rs), nothing installed from it
#   - the trixie-backports suite, pinned to priority 1, so that
#     `cargo xtask kernel` can `apt-get download` a sched_ext kernel without
#     anything else on the machine being upgraded from it
#   - deb-src entries for the machine's own Debian suites, so that the VM's
#     cache model (xtask/cachesim) can take QEMU's plugin API header from
#     Debian's qemu source package (it is in no binary package)
set -euo pipefail

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup.sh: must run as root (it calls apt-get)" >&2
		exit 1
	fi
}

# The mirror URI this machine already uses for Debian; reused for the
# backports suite so that no host name is written into the project.
debian_uri() {
	local uri=""
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list)
	fi
	if [ -z "$uri" ]; then
		echo "setup.sh: cannot find the Debian mirror URI in /etc/apt" >&2
		exit 1
	fi
	echo "$uri"
}

add_backports_suite() {
	local list=/etc/apt/sources.list.d/scx-sky-trixie-backports.sources
	local pin=/etc/apt/preferences.d/scx-sky-trixie-backports
	if [ ! -f "$list" ]; then
		cat >"$list" <<SRC
Types: deb
URIs: $(debian_uri)
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		APT_UPDATED=""
	fi
	if [ ! -f "$pin" ]; then
		cat >"$pin" <<PIN
# scx_sky: only used to download a sched_ext kernel; never install from it.
Package: *
Pin: release n=trixie-backports
Pin-Priority: 1
PIN
	fi
}

# deb-src twins of the machine's own deb entries (its mirrors, its suites).
add_source_entries() {
	local list=/etc/apt/sources.list.d/scx-sky-deb-src.sources
	[ -f "$list" ] && return
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$list"
	elif [ -f /etc/apt/sources.list ]; then
		list=/etc/apt/sources.list.d/scx-sky-deb-src.list
		[ -f "$list" ] && return
		sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$list"
	else
		echo "setup.sh: no Debian entries in /etc/apt to add deb-src for" >&2
		exit 1
	fi
	APT_UPDATED=""
}

APT_UPDATED=""
apt_update_once() {
	if [ -z "$APT_UPDATED" ]; then
		apt-get update -qq
		APT_UPDATED=1
	fi
}

# What building scx_sky needs (`setup.sh --build`: `cargo xtask install`).
BUILD_PACKAGES=(clang-19 llvm-19 libelf-dev zlib1g-dev libzstd-dev pkg-config cmake)
# And what the checks and the VM test bed need.
PACKAGES=("${BUILD_PACKAGES[@]}" clang-format-19 e2fsprogs
	qemu-system-x86 busybox-static cpio xz-utils zstd fonts-dejavu-core iproute2 systemd dbus polkitd)

missing_packages() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
	done
}

# --build: the build's packages only, from the machine's own suites; as
# root (through sudo for a user) only when one is missing.
build_only() {
	local missing
	missing=$(missing_packages "${BUILD_PACKAGES[@]}")
	if [ -n "$missing" ]; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "setup.sh: installing $(echo $missing) with sudo" >&2
			exec sudo bash "$0" --build
		fi
		apt-get update -qq
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
	fi
	echo "setup.sh: build dependencies ready (clang-19, libelf, cmake)"
}

main() {
	if [ "${1:-}" = --build ]; then
		build_only
		return
	fi
	need_root
	add_backports_suite
	add_source_entries
	local missing
	missing=$(missing_packages "${PACKAGES[@]}")
	if [ -n "$missing" ]; then
		apt_update_once
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm $missing
	fi
	# The kernel download needs the backports package lists, the plugin
	# header the source lists.
	if ! apt-cache policy 2>/dev/null | grep -q 'trixie-backports' ||
		! apt-cache showsrc qemu >/dev/null 2>&1; then
		apt_update_once
	fi
	if ! command -v cargo >/dev/null; then
		echo "setup.sh: cargo not found; install Rust (rustup) first" >&2
		exit 1
	fi
	rustup component add rustfmt clippy >/dev/null 2>&1 || true
	echo "setup.sh: toolchain ready (clang-19, qemu, busybox)"
}

main "$@"
