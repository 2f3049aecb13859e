# The shared-space benchmark on emulated persistent memory: the qemu NVDIMM
# as an fsdax namespace with ext4 mounted with DAX (lib.sh pmem_dax_mount),
# so the queue maps its space with MAP_SYNC and persists with cache-line
# flushes and a fence. Fails rather than run on the page cache.
. ./lib.sh
set -o pipefail
unset SKY_PVAS_PERSIST
pmem_dax_mount /mnt/pmem || exit 1
sky-pvas-bench /mnt/pmem | tee /tmp/bench.out || exit 1
bench_persistence /tmp/bench.out
[ "$persist" = flush+fence ]
