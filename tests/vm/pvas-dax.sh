# The persistent queue on real DAX (run by tests/vm.rs
# pvas_queue_survives_crashes_on_dax, which builds and places the crash
# tests): the qemu NVDIMM as an fsdax namespace with ext4 mounted -o dax
# (lib.sh pmem_dax_mount); a space there must be mapped with MAP_SYNC and
# persist with cache-line flushes and a fence (checks persist, map_sync);
# then sky-pvas's crash tests run with their spaces on that mount. Fails
# rather than fall back to the page cache or msync.
#
# Args: crash tests to run (exact names; default: every one).
. ./lib.sh
unset SKY_PVAS_PERSIST
pmem_dax_mount /mnt/pmem || exit 1
failed=0

# The persistence a space on the mount gets, as sky-pvas chose it (the
# benchmark's heading, printed once its space is attached) and as the
# kernel sees the mapping (VmFlags "sf": a MAP_SYNC mapping, in
# /proc/PID/smaps). The benchmark itself is not needed here (cargo xtask
# bench-pvas --pmem-vm runs it): it is stopped, with its peer, after that.
mkdir -p /mnt/pmem/bench
setsid sky-pvas-bench /mnt/pmem/bench >/tmp/bench.out 2>&1 &
bench=$!
wait_line /tmp/bench.out 'persistence: ' "$bench" 600
bench_persistence /tmp/bench.out
# The space's backing file (space.rs FILE_PREFIX) and its VmFlags line.
flags=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { space = /\/scx_sky-pvas-/ }
	space && /^VmFlags:/ { print; exit }' "/proc/$bench/smaps" 2>/dev/null)
echo "smaps of the space: ${flags:-no mapping found}"
case " $flags " in
*" sf "*) echo "check map_sync=yes" ;;
*) echo "check map_sync=no" ;;
esac
kill -KILL -- "-$bench" 2>/dev/null
wait "$bench" 2>/dev/null
rm -rf /mnt/pmem/bench
[ "$persist" = flush+fence ] || failed=1
case " $flags " in *" sf "*) ;; *) failed=1 ;; esac

# The crash tests put their spaces under $SKY_PVAS_TEST_DIR (else
# /dev/shm, made read-only meanwhile so that nothing lands there unseen).
tests=${*:-$(sky-pvas-crash-tests --list 2>/dev/null | sed -n 's/: test$//p')}
mount -o remount,ro /dev/shm
for t in $tests; do
	start=$(date +%s)
	SKY_PVAS_TEST_DIR=/mnt/pmem SKY_PVAS_PEER=/bin/sky-pvas-crash-peer \
		sky-pvas-crash-tests --exact --test-threads=1 "$t" \
		>/tmp/crash.out 2>&1
	rc=$?
	cat /tmp/crash.out
	# A name that matches no test (say, one behind a feature the binary
	# lacks) "passes" with 0 tests: that is a failure here.
	grep -q 'test result: ok. 1 passed' /tmp/crash.out || rc=1
	echo "check crash_$t=$rc seconds=$(($(date +%s) - start))"
	[ "$rc" = 0 ] || failed=1
done
mount -o remount,rw /dev/shm
exit $failed
