# The shared-space benchmark on emulated persistent memory: qemu NVDIMM as
# /dev/pmem0 with ext4, mounted with DAX if the namespace allows it
# (persistence flush+fence via MAP_SYNC), else without (msync).
mkdir -p /mnt/pmem
if [ ! -b /dev/pmem0 ]; then
	echo "check pmem=missing"
	exit 1
fi
mkfs.ext4 -q -F /dev/pmem0 || exit 1
if mount -t ext4 -o dax /dev/pmem0 /mnt/pmem 2>/dev/null; then
	echo "check pmem_mount=dax"
else
	mount -t ext4 /dev/pmem0 /mnt/pmem || exit 1
	echo "check pmem_mount=page-cache"
fi
sky-pvas-bench /mnt/pmem
