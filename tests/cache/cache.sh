#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "cache" suite: the block cache through a real mount.
#
#   cache.sh ISERFUSE_BINARY
#
# tgtd with two 64 MiB LUNs (512- and 4096-byte blocks) filled with random
# bytes.  For the write-through default and for -o writeback, each with an
# 8 MiB cache (so that blocks are evicted): a streamed read of the whole
# LUN equals the backing file and uses read-ahead; random overlapping
# buffered and O_DIRECT reads and writes (tests/cache/cache_model.py) match a
# model at every read; after fsync (write-through) or unmount (write-back)
# the backing file equals the model; a fresh mount reads the model back.
# Coherence with another initiator (a second mount, its own session, no
# cache): for the cache off, write-through and write-back, a region read
# through the file, rewritten by the second initiator, is read anew after
# close and open (close-to-open); with the file kept open, a region changed
# on the target and a dropped connection (tgtd's POWER ON / RESET UNIT
# ATTENTION for the new I_T nexus) make the open file's reads see the
# target's data within a rescan interval.  With -o writeback, a write to a
# cached block that the second initiator wrote in part since keeps the
# second initiator's bytes (only the logical blocks written are written
# back).
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed";
# exits 1 if anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
need_exe "$1"
iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
need_root "mounting FUSE and running tgtd need root"

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-cache.XXXXXX")
sanitizer_logs "$work"
mnt=$work/mnt
mnt2=$work/mnt2
mkdir -p "$mnt" "$mnt2"
daemon='' daemon2='' reader=''

cleanup() {
	local rc=$?
	set +e
	[[ -n $reader ]] && _targets_kill "$reader" 5
	for m in "$mnt" "$mnt2"; do
		if mountpoint -q "$m"; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"
		fi
	done
	[[ -n $daemon ]] && _targets_kill "$daemon" 5
	[[ -n $daemon2 ]] && _targets_kill "$daemon2" 5
	tgtd_stop "$work/tgtd"
	sanitizer_check || rc=1
	if ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		rm -f "$work"/tgtd/*.img "$work"/*.model
		echo "# logs kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! tgtd_start "$work/tgtd" >/dev/null 2>"$work/log"; then
	fail "tgtd started"
	note "$work/log"
	summary
	exit 1
fi
img1=$work/tgtd/disk512.img
img2=$work/tgtd/disk4k.img
dd if=/dev/urandom of="$img1" bs=1M count=64 conv=notrunc status=none
dd if=/dev/urandom of="$img2" bs=1M count=64 conv=notrunc status=none

# mount_cache OPTIONS...: mount in the foreground in the background; daemon = its PID.
mount_cache() {
	"$iserfuse" -f -o cache_size=8M -o initiator_name=iqn.2026-11.org.example:cache-a "$@" "$TGT_URL" "$mnt" \
		2>"$work/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do
		[[ -e $mnt/lun2 ]] && return 0
		sleep 0.1
	done
	return 1
}
# unmount: the daemon writes back, syncs and exits.
unmount_cache() {
	fusermount3 -u "$mnt"
	local rc=0
	timeout 60 tail --pid="$daemon" -f /dev/null || rc=1
	wait "$daemon" 2>/dev/null || rc=$?
	daemon=''
	return "$rc"
}

run_mode() {
	local mode=$1 opts=()
	[[ $mode == writeback ]] && opts=(-o writeback)
	if ! mount_cache "${opts[@]}"; then
		fail "$mode: mount with the cache on"
		note "$work/daemon.log"
		return
	fi
	pass "$mode: mount with -o cache_size=8M ${opts[*]}"
	# A streamed read: read-ahead ahead of a 1 MiB sequential reader.
	check "$mode: lun1 read sequentially equals its backing file" \
		cmp <(dd if="$mnt/lun1" bs=1M status=none) "$img1"
	local ra_used
	ra_used=$(awk '$1 == "cache_readahead_used_bytes" {print $2}' "$mnt/.stats" 2>&1) || true
	if [[ $ra_used =~ ^[0-9]+$ ]] && ((ra_used > 0)); then
		pass "$mode: the streamed read used read-ahead (.stats cache_readahead_used_bytes $ra_used)"
	else
		fail "$mode: the streamed read used read-ahead (.stats cache_readahead_used_bytes '$ra_used')"
	fi
	local lun img block
	for lun in 1 2; do
		img=$work/tgtd/disk$([[ $lun == 1 ]] && echo 512 || echo 4k).img
		block=$([[ $lun == 1 ]] && echo 512 || echo 4096)
		cp "$img" "$work/lun$lun.model"
		if timeout 300 python3 "$here/cache_model.py" "$mnt/lun$lun" "$work/lun$lun.model" "$block" 1500 \
			"$lun$((${#mode}))" >"$work/model.log" 2>&1; then
			pass "$mode: lun$lun: random overlapping reads and writes match the model ($(tail -n 1 "$work/model.log"))"
		else
			fail "$mode: lun$lun: random overlapping reads and writes match the model"
			note "$work/model.log"
		fi
		if [[ $mode == write-through ]]; then
			check "$mode: lun$lun: after fsync the backing file equals the model" cmp "$img" "$work/lun$lun.model"
		fi
	done
	check "$mode: lun2 read through the mount equals the model" cmp "$mnt/lun2" "$work/lun2.model"
	if unmount_cache; then
		pass "$mode: unmount, daemon exits 0"
	else
		fail "$mode: unmount, daemon exits 0"
		note "$work/daemon.log"
	fi
	for lun in 1 2; do
		img=$work/tgtd/disk$([[ $lun == 1 ]] && echo 512 || echo 4k).img
		check "$mode: lun$lun: after unmount the backing file equals the model" cmp "$img" "$work/lun$lun.model"
	done
	grep -h "block cache:" "$work/daemon.log" | sed 's/^/# /' || true
}

run_mode write-through
run_mode writeback
# Written back data is read back by a fresh mount (no cache state carried over).
if mount_cache; then
	check "a fresh mount reads lun1 as the model" cmp "$mnt/lun1" "$work/lun1.model"
	unmount_cache || fail "fresh mount: unmount"
fi

# ---------------------------------------------------------------- another initiator

# The second initiator: a second mount (its own session and I_T nexus), no cache, O_DIRECT writes.
if "$iserfuse" -f -o cache_size=0 -o initiator_name=iqn.2026-11.org.example:cache-b "$TGT_URL" "$mnt2" \
	2>"$work/daemon2.log" &
then
	daemon2=$!
fi
for _ in $(seq 100); do
	[[ -e $mnt2/lun1 ]] && break
	sleep 0.1
done
if test -e "$mnt2/lun1"; then
	pass "a second initiator mounts the same LUNs"
else
	fail "a second initiator mounts the same LUNs"
	note "$work/daemon2.log"
	[[ -n $daemon2 ]] && kill "$daemon2" 2>/dev/null
	daemon2=''
fi

# region OFF_MIB: 1 MiB of lun1 read through the first mount (twice: the second read is cached).
read_region() {
	dd if="$mnt/lun1" bs=64k skip=$(($1 * 16)) count=16 status=none
}
# other_write OFF_MIB FILE: the second initiator writes FILE (1 MiB) there and syncs.
other_write() {
	dd if="$2" of="$mnt2/lun1" bs=64k seek=$(($1 * 16)) oflag=direct conv=notrunc,fsync status=none
}

coherence() {
	local what=$1 at=$2
	shift 2
	if ! mount_cache "$@"; then
		fail "$what: mount"
		note "$work/daemon.log"
		return
	fi
	read_region "$at" >/dev/null
	read_region "$at" >"$work/old.bin"
	head -c 1048576 /dev/urandom >"$work/new.bin"
	other_write "$at" "$work/new.bin"
	check "$what: the second initiator's write reached the target" \
		cmp <(dd if="$img1" bs=64k skip=$((at * 16)) count=16 status=none) "$work/new.bin"
	check "$what: after close and open the file reads the second initiator's write" \
		cmp <(read_region "$at") "$work/new.bin"
	unmount_cache || fail "$what: unmount"
}
if [[ -n $daemon2 ]]; then
	coherence "close-to-open, no cache (the kernel's page cache)" 4 -o cache_size=0
	coherence "close-to-open, write-through cache" 8
	coherence "close-to-open, write-back cache" 12 -o writeback
fi

# Write-back sends only the logical blocks this mount wrote: the first mount
# reads a zeroed MiB (its 64 KiB cache blocks are cached), the second
# initiator then writes the second half of one block's first 8 KiB
# (from 2 KiB, or the second 4 KiB logical block), the first mount writes
# the first 512 bytes of that block (on lun2 a part of a 4096-byte logical
# block) and fsyncs: the target holds both writes.
partial_block() {
	local lun=$1 at=$2 from=$3
	python3 - "$mnt/$lun" "$mnt2/$lun" $((at * 1048576)) "$from" <<'PY'
import mmap, os, sys
A, B, base, frm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def wr(p, off, d):
    fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
    m = mmap.mmap(-1, len(d))
    m.write(d)
    os.pwritev(fd, [m], off)
    os.fsync(fd)
    os.close(fd)
def odread(p, off, n):
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    m = mmap.mmap(-1, n)
    os.preadv(fd, [m], off)
    os.close(fd)
    return bytes(m)
wr(B, base, bytes(1 << 20))
f = os.open(A, os.O_RDWR)
for k in range(0, 1 << 20, 65536):
    os.pread(f, 65536, base + k)
blk = base + 3 * 65536
wr(B, blk + frm, b"B" * (8192 - frm))
os.pwrite(f, b"A" * 512, blk)
os.fsync(f)
os.close(f)
d = odread(B, blk, 65536)
want = b"A" * 512 + bytes(frm - 512) + b"B" * (8192 - frm) + bytes(65536 - 8192)
print("#   A landed: %s, B survived: %s, whole block as expected: %s" % (d[:512] == want[:512], d[frm:8192] == want[frm:8192],
                                                  d == want))
sys.exit(0 if d == want else 1)
PY
}
if [[ -n $daemon2 ]]; then
	if mount_cache -o writeback; then
		for l in "lun1 24 2048" "lun2 24 4096"; do
			read -r lun at from <<<"$l"
			check "write-back of a block the second initiator wrote in part keeps its bytes ($lun)" \
				partial_block "$lun" "$at" "$from"
		done
		unmount_cache || fail "partial block write-back: unmount"
	else
		fail "partial block write-back: mount"
		note "$work/daemon.log"
	fi
fi

# A UNIT ATTENTION saying the LU may have changed (POWER ON / RESET for the
# new I_T nexus after a dropped connection) drops the cached data, also the
# kernel's pages of a file kept open.
if mount_cache -o rescan_interval=1; then
	ctl=$(<"$work/tgtd/ctl")
	head -c 1048576 /dev/urandom >"$work/new.bin"
	rm -f "$work/ua.go"
	python3 - "$mnt/lun1" $((20 * 1048576)) "$work/new.bin" "$work/ua.go" >"$work/ua.out" 2>&1 <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
off, n = int(sys.argv[2]), 1 << 20
os.pread(fd, n, off)
old = os.pread(fd, n, off)
print("cached", flush=True)
t0 = time.monotonic()
while not os.path.exists(sys.argv[4]):  # the target's data changed, the connection dropped
    if time.monotonic() - t0 > 30:
        print("never told that the connection dropped")
        sys.exit(1)
    time.sleep(0.05)
new = open(sys.argv[3], "rb").read()
t0 = time.monotonic()
while time.monotonic() - t0 < 20:
    got = os.pread(fd, n, off)
    if got == new:
        print("new data after %.1f s" % (time.monotonic() - t0))
        sys.exit(0)
    time.sleep(0.25)
print("still the old data after 20 s" if got == old else "other data after 20 s")
sys.exit(1)
PY
	reader=$!
	for _ in $(seq 50); do
		grep -q cached "$work/ua.out" && break
		sleep 0.1
	done
	dd if="$work/new.bin" of="$img1" bs=1M seek=20 conv=notrunc,fsync status=none
	sid=$(timeout 10 tgtadm -C "$ctl" --lld iscsi --op show --mode target |
		awk '/I_T nexus:/ {n = $3} /Initiator: iqn.2026-11.org.example:cache-a/ {print n; exit}')
	if [[ -n $sid ]] && timeout 10 tgtadm -C "$ctl" --lld iscsi --op delete --mode conn --tid 1 --sid "$sid" --cid 0; then
		touch "$work/ua.go"
	else
		fail "tgtd drops the first mount's connection (I_T nexus '$sid')"
	fi
	rc=0
	wait "$reader" || rc=$?
	reader=''
	if ((rc == 0)); then
		pass "a file kept open reads the target's new data after a POWER ON/RESET UNIT ATTENTION ($(tail -n 1 "$work/ua.out"))"
	else
		fail "a file kept open reads the target's new data after a POWER ON/RESET UNIT ATTENTION (I_T nexus '$sid')"
		note "$work/ua.out"
		grep -i "attention\|reinstat\|connection" "$work/daemon.log" | tail -n 5 | sed 's/^/#   /'
	fi
	unmount_cache || fail "UNIT ATTENTION: unmount"
fi
if [[ -n $daemon2 ]]; then
	fusermount3 -u "$mnt2"
	rc=0
	if _targets_wait_gone "$daemon2" 20; then
		wait "$daemon2" 2>/dev/null || rc=$?
		check_eq "the second initiator unmounts and exits 0" "$rc" 0
	else
		fail "the second initiator exits within 20 s of its unmount"
	fi
	daemon2=''
fi
summary
