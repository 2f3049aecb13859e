#!/bin/busybox sh
# PID 1 of the scx_sky test VM: set up a minimal system, run /run.sh as
# root, report its exit status on the console, power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/shm /tmp
mount -t tmpfs tmp /tmp
mount -t tmpfs shm /dev/shm
# Pseudo-terminals, for the test that drives `scx_sky top` through one.
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts -o ptmxmode=0666,mode=0620
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# The kernel's own messages go to dmesg only: scenario output stays readable.
echo 1 > /proc/sys/kernel/printk
for ko in /lib/modules/sky/*.ko; do
	[ -e "$ko" ] && insmod "$ko"
done
echo "sky-vm: up, $(nproc) CPUs, kernel $(uname -r)"
# A guest with systemd (xtask/src/systemd_guest.rs): it runs the scenario
# as a service of its default target and powers off after it.
if [ -e /etc/systemd/system/sky-vm.target ]; then
	echo "sky-vm: starting systemd"
	exec /lib/systemd/systemd
fi
cd /scenarios
sh /run.sh
rc=$?
echo "SKY-VM-EXIT=$rc"
sync
poweroff -f
