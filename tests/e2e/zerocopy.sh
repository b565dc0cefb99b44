#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "zero-copy-write" test of the e2e suite: a block-aligned write is
# read from /dev/fuse straight into the pool slice that goes to the target,
# with no copy in user space, and what is copied is counted.
#
#   zerocopy.sh ISERFUSE_BINARY
#
# Starts tgtd (LUN 1, 256 MiB, sparse), mounts it over TCP (iserfuse -f
# in the background, so that its exit status is read) with cache_size=0
# (no block cache: it copies by design) and rescan_interval=0 (no periodic
# READ CAPACITY whose Data-In would count with the reads), then:
#   - 64 MiB of O_DIRECT 1 MiB writes (dd): .stats payload_bytes_copied
#     does not move, the data reads back with the same sha256;
#   - the 64 MiB read back in 1 MiB and 8 MiB of it in 64 KiB O_DIRECT
#     reads: payload_bytes_copied grows by under 1 % of it (Data-In
#     payloads are read from the socket straight into the slice, except
#     one whose header came in one read with other PDUs); 4 MiB in 4 KiB
#     reads: copied out of the receive buffer, counted, at most 4 MiB;
#   - one unaligned write of 5000 bytes at byte 100 (no O_DIRECT): it
#     moves payload_bytes_copied by exactly 5000 and rmw_bytes_copied by
#     the 120 edge bytes merged into its 512-byte blocks, and reads back;
# the daemon ends on SIGTERM with exit status 0; then remounts with the
# block cache (default size), writeback and rescan_interval=0: 4 MiB
# of buffered writes move cache_bytes_copied by 8 MiB (kept in the cache,
# then handed to write-back) and payload_bytes_copied by at most the 4 MiB
# (writes the kernel sends while every slice is held are copied).  Over
# FUSE over io_uring (.stats fuse_path io_uring) the ring entries are not
# pool slices: the writes are copied and counted, and that is checked.
# The second daemon, too, must end on SIGTERM with exit status 0.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root.  Needs root,
# /dev/fuse, tgt, fuse3, dd, sha256sum.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the test mounts FUSE and runs tgtd, which needs root"

[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
need_tools tgtd tgtadm fusermount3 mountpoint dd sha256sum head cmp timeout

suite_scratch zerocopy
mnt=$work/mnt
mkdir -p "$mnt"

suite_drop=('tgtd/*.img' 'data' 'back')
daemon=''
suite_teardown() {
	force_unmount "$mnt"
	[[ -n $daemon ]] && _targets_kill "$daemon" 5
	kill_daemons "$mnt" 5
	tgtd_stop "$work/tgtd"
	is_mounted "$mnt" && suite_busy="$mnt is still mounted"
	return 0
}

if ! tgtd_start "$work/tgtd" 256M 0 >/dev/null 2>"$work/log"; then
	fail "tgtd started"
	note "$work/log"
	summary
	exit 1
fi
pass "tgtd started ($TGT_URL)"

# zc_mount LOG OPTS...: iserfuse -f in the background ($daemon, stderr to LOG) with
# rescan_interval=0 and OPTS; 1 unless lun1 appears within 30 s
zc_mount() {
	local log=$1
	shift
	"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:zerocopy -o rescan_interval=0 "$@" \
		"$TGT_URL/1" "$mnt" >"$log" 2>&1 </dev/null &
	daemon=$!
	wait_lun "$mnt" 300 "$daemon"
}

if ! zc_mount "$work/daemon.log" -o cache_size=0; then
	fail "mount with cache_size=0: $mnt/lun1 is there"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mount with cache_size=0: $mnt/lun1 is there"
check_eq ".stats: transport tcp" "$(stat_of transport)" tcp
# over FUSE over io_uring the ring entries' buffers are not pool slices: writes are copied (and counted)
rings=''
[[ $(stat_of fuse_path) == io_uring ]] && rings=1

# ---- aligned: 64 MiB of O_DIRECT 1 MiB writes, no copy
head -c $((64 << 20)) /dev/urandom >"$work/data"
c0=$(stat_of payload_bytes_copied)
w0=$(stat_of bytes_written)
rc=0
dd if="$work/data" of="$mnt/lun1" bs=1M count=64 oflag=direct conv=notrunc status=none || rc=$?
check_eq "dd of 64 MiB, 1 MiB O_DIRECT writes, exits 0" "$rc" 0
c1=$(stat_of payload_bytes_copied)
w1=$(stat_of bytes_written)
echo "# payload_bytes_copied $c0 -> $c1, bytes_written $w0 -> $w1"
check_eq "bytes_written grew by the 64 MiB" "$((w1 - w0))" $((64 << 20))
if [[ -n $rings ]]; then
	check_eq "payload_bytes_copied grew by the 64 MiB over the rings (counted)" "$((c1 - c0 >= 64 << 20))" 1
else
	check_eq "payload_bytes_copied did not move for the aligned writes" "$((c1 - c0))" 0
fi
# ---- aligned reads, O_DIRECT, 1 MiB and 4 KiB: the Data-In payload is read from the socket straight
# into the slice the reply is sent from, no copy
c0=$(stat_of payload_bytes_copied)
dd_check "64 MiB read back in 1 MiB O_DIRECT reads" "$work/daemon.log" \
	if="$mnt/lun1" of="$work/back" bs=1M count=64 iflag=direct || true
check_eq "the 64 MiB read back have the sha256 written" "$(sha256sum <"$work/back" | cut -d' ' -f1)" \
	"$(sha256sum <"$work/data" | cut -d' ' -f1)"
dd_check "8 MiB read back in 64 KiB O_DIRECT reads" "$work/daemon.log" \
	if="$mnt/lun1" of="$work/back" bs=64k count=128 iflag=direct || true
check_eq "8 MiB read back in 64 KiB O_DIRECT reads are what was written" \
	"$(sha256sum <"$work/back" | cut -d' ' -f1)" "$(head -c $((8 << 20)) "$work/data" | sha256sum | cut -d' ' -f1)"
c1=$(stat_of payload_bytes_copied)
echo "# reads: payload_bytes_copied $c0 -> $c1"
if [[ -n $rings ]]; then
	check_eq "payload_bytes_copied grew by the 72 MiB read over the rings (counted)" "$((c1 - c0 >= 72 << 20))" 1
else
	# a Data-In whose header comes in one read(2) with other PDUs is copied out of the receive buffer
	# (counted); after a large Data-In the next header is read alone: under 1 % (was all of it)
	check "payload_bytes_copied grew by under 1 % of the 72 MiB read ($((c1 - c0)) bytes)" \
		test "$((c1 - c0))" -lt $(((72 << 20) / 100))
fi
# 4 KiB reads: payloads under 16 KiB are read many PDUs to a read(2) and copied out of the receive
# buffer (cheaper than a system call per PDU), and counted: at most the 4 MiB read.  Nothing else
# moves the count meanwhile (rescan_interval=0: no periodic READ CAPACITY), so the bound is exact:
# each payload is copied at most once.
c0=$(stat_of payload_bytes_copied)
dd_check "4 MiB read back in 4 KiB O_DIRECT reads" "$work/daemon.log" \
	if="$mnt/lun1" of="$work/back" bs=4k count=1024 iflag=direct || true
check_eq "4 MiB read back in 4 KiB O_DIRECT reads are what was written" \
	"$(sha256sum <"$work/back" | cut -d' ' -f1)" "$(head -c $((4 << 20)) "$work/data" | sha256sum | cut -d' ' -f1)"
c1=$(stat_of payload_bytes_copied)
echo "# 4 KiB reads: payload_bytes_copied $c0 -> $c1"
ring=0 # over the rings every read is also copied into its ring entry, the .stats read that took c0 too
[[ -n $rings ]] && ring=1
st=$(wc -c <"$mnt/.stats")
check "payload_bytes_copied grew by at most the 4 MiB of 4 KiB reads (twice over the rings, + a $st-byte .stats read: $((c1 - c0)))" \
	test "$((c1 - c0))" -le $(((1 + ring) * (4 << 20) + ring * st))
# 4 KiB and 512 KiB reads in turn: the first large Data-In after a small PDU may have come in with a
# read sized for small PDUs (at most 64 KiB); the rest of it goes straight into the slice
c0=$(stat_of payload_bytes_copied)
rc=0
for i in 0 1 2 3 4 5 6 7; do
	dd if="$mnt/lun1" of=/dev/null bs=4k count=1 skip=$((i * 300)) iflag=direct status=none 2>>"$work/dd.err" || rc=1
	dd if="$mnt/lun1" of=/dev/null bs=512k count=1 skip=$((i + 8)) iflag=direct status=none 2>>"$work/dd.err" || rc=1
done
check_eq "8 pairs of 4 KiB and 512 KiB O_DIRECT reads succeed" "$rc" 0
((rc == 0)) || note "$work/dd.err"
c1=$(stat_of payload_bytes_copied)
echo "# 4 KiB and 512 KiB in turn: payload_bytes_copied $c0 -> $c1"
check "payload_bytes_copied grew by at most 4 KiB + 64 KiB per pair of reads (+ the pair over the rings: $((c1 - c0)))" \
	test "$((c1 - c0))" -le $((8 * (4096 + 65536 + ring * (4096 + 524288))))

# ---- unaligned: 5000 bytes at byte 100, copied and counted
c0=$(stat_of payload_bytes_copied)
m0=$(stat_of rmw_bytes_copied)
head -c 5000 /dev/urandom >"$work/small"
rc=0
dd if="$work/small" of="$mnt/lun1" bs=5000 count=1 seek=100 oflag=seek_bytes conv=notrunc,fsync status=none || rc=$?
check_eq "dd of 5000 bytes at byte 100 exits 0" "$rc" 0
c1=$(stat_of payload_bytes_copied)
m1=$(stat_of rmw_bytes_copied)
echo "# unaligned: payload_bytes_copied $c0 -> $c1, rmw_bytes_copied $m0 -> $m1"
# 5000 bytes copied into the slice, plus what the TCP transport copied of the two 512-byte edge blocks it
# read (a Data-In that arrives whole with its header is copied out of the receive buffer): 0 .. 1024
d=$((c1 - c0))
if [[ -n $rings ]]; then
	check "payload_bytes_copied grew by at least the 5000 unaligned bytes over the rings ($d)" test "$d" -ge 5000
else
	check "payload_bytes_copied grew by the 5000 unaligned bytes (+ at most the 1024 of the edge reads: $d)" \
		test "$d" -ge 5000 -a "$d" -le 6024
fi
# blocks 0 and 1 (512-byte blocks: LBA 0 .. 9) are merged: 100 bytes before, 5120 - 5100 = 20 after
check_eq "rmw_bytes_copied grew by the 100 + 20 edge bytes merged" "$((m1 - m0))" 120
echo 3 >/proc/sys/vm/drop_caches
check "the unaligned bytes read back" cmp -s "$work/small" <(dd if="$mnt/lun1" bs=5100 count=1 status=none | tail -c 5000)
check "the aligned data around them is intact" cmp -s <(head -c 100 "$work/data") <(head -c 100 "$mnt/lun1")

sigterm_check "the daemon ends on SIGTERM"

# ---- the block cache (default cache_size) with write-back: it copies, by design, and counts it
if ! zc_mount "$work/daemon2.log" -o writeback; then
	fail "mount with the block cache and writeback: $mnt/lun1 is there again"
	note "$work/daemon2.log"
	summary
	exit 1
fi
pass "mount with the block cache and writeback: $mnt/lun1 is there again"
c0=$(stat_of payload_bytes_copied)
k0=$(stat_of cache_bytes_copied)
rc=0
dd if="$work/data" of="$mnt/lun1" bs=1M count=4 seek=8 conv=notrunc,fsync status=none || rc=$?
check_eq "dd of 4 MiB, buffered, fsync, exits 0" "$rc" 0
c1=$(stat_of payload_bytes_copied)
k1=$(stat_of cache_bytes_copied)
echo "# cached: payload_bytes_copied $c0 -> $c1, cache_bytes_copied $k0 -> $k1"
# The kernel's write-back sends these writes many at once: a reader that found every slice held reads
# into libfuse's buffer and its write is copied (and counted), so only a bound holds here.
# (plus what TCP copies of small Data-In answers meanwhile: a few KiB)
check "payload_bytes_copied grew by at most the 4 MiB written, + 64 KiB ($((c1 - c0)))" \
	test "$((c1 - c0))" -le $(((4 << 20) + 65536))
check_eq "cache_bytes_copied grew by 4 MiB kept in the cache + 4 MiB handed to write-back" "$((k1 - k0))" $((8 << 20))
check "the cached write reads back after the write-back" \
	cmp -s <(head -c $((4 << 20)) "$work/data") <(dd if="$mnt/lun1" bs=1M skip=8 count=4 iflag=direct status=none)
sigterm_check "the cached daemon ends on SIGTERM"

summary
