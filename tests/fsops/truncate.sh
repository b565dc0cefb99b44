#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "fsops" suite, truncation: the tools that put an image on a file
# truncate it first and then skip the image's zero runs, taking the file
# to read as zeroes there.  On a LUN file, truncating zeroes what it cuts
# (the file keeps the LUN's capacity), so each copy ends byte-identical.
#
#   truncate.sh ISERFUSE_BINARY
#
# tgtd serves LUN 1 (32 MiB, 512-byte blocks) with thin_provisioning=1
# (UNMAP, LBPRZ) and LUN 2 (32 MiB, 4096-byte blocks) without.  On each,
# first filled with 0xee: qemu-img convert -O raw (no -n), qemu-img
# convert -O qcow2 -o preallocation=metadata, qemu-img create -f raw, cp,
# dd conv=sparse and rsync --inplace --sparse of a 24 MiB sparse image
# (random bytes in its middle only) must each exit 0 with the LUN holding
# the image and zeroes after it (qemu-img compare, cmp), or exit non-zero;
# never exit 0 with other bytes.  Then, on the thin LUN: truncate within a
# block, an open descriptor reading the cut part after its own ftruncate
# (the kernel's pages are dropped), the size kept, EFBIG beyond the
# capacity; and with -o writeback, data not yet written back that a cp
# truncates away.
#
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root, 2 on bad usage.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 "ISERFUSE_BINARY" "$@"
need_exe "$1"
iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
need_root "the fsops suite mounts FUSE and runs tgtd, which needs root"
need_tools tgtd tgtadm fusermount3 qemu-img python3 timeout cmp rsync

MiB=$((1024 * 1024))
lun_size=$((32 * MiB))
img_size=$((24 * MiB))
suite_scratch truncate
suite_drop=('tgtd/*.img' '*.raw')
mnt=$work/mnt
mkdir -p "$mnt"

# unmount: the daemon writes everything back and exits by itself (else it is killed after 20 s).
unmount() {
	local p
	force_unmount "$mnt"
	for p in $(daemon_pids "$mnt"); do
		wait_exit "$p" 200 || _targets_kill "$p" 5
	done
}
suite_teardown() {
	unmount
	tgtd_stop "$work/tgtd"
	if is_mounted "$mnt"; then
		suite_busy="$mnt is still mounted"
	fi
}

# mount_luns [OPTION...]: mount every LUN of the target with the options; the daemon logs to $work/daemon.log.
mount_luns() {
	if timeout -k 10 120 "$iserfuse" -o initiator_name=iqn.2026-11.org.example:truncate \
		-o log_level=debug -o "log_file=$work/daemon.log" "$@" "$TGT_URL" "$mnt" \
		>"$work/mount.out" 2>"$work/mount.err" </dev/null && is_mounted "$mnt"; then
		pass "mount $* $TGT_URL"
		return 0
	fi
	fail "mount $* $TGT_URL"
	note "$work/mount.err"
	return 1
}

# ---------------------------------------------------------------- target

if ! tgtd_start "$work/tgtd" 32M 32M >/dev/null 2>"$work/log"; then
	fail "tgtd starts"
	note "$work/log"
	exit 1
fi
ctl=$(<"$work/tgtd/ctl")
if _tgtadm "$ctl" --op update --mode logicalunit --tid 1 --lun 1 --params thin_provisioning=1 >"$work/log" 2>&1 &&
	[[ $(_tgtadm "$ctl" --op show --mode target | grep -c 'Thin-provisioning: Yes') == 1 ]]; then
	pass "tgtd: LUN 1 thin provisioned, LUN 2 not"
else
	fail "tgtd: LUN 1 thin provisioned, LUN 2 not"
	note "$work/log"
	exit 1
fi
mount_luns || exit 1

# A sparse image: holes, 8 MiB of random bytes from 6 MiB, holes to 24 MiB.
src=$work/src.raw
truncate -s "$img_size" "$src"
head -c $((8 * MiB)) /dev/urandom | dd of="$src" bs=1M seek=6 conv=notrunc status=none
python3 -c 'import sys; sys.stdout.buffer.write(b"\xee" * (32 << 20))' >"$work/pattern.raw"

# fill LUN: the pattern over the whole LUN, through the mount (no truncation).
fill() {
	dd if="$work/pattern.raw" of="$mnt/$1" bs=1M conv=notrunc,fsync status=none
}

# holds LUN: the LUN's first $img_size bytes are the image's, the rest zeroes.
holds() {
	cmp -s -n "$img_size" "$src" "$mnt/$1" &&
		cmp -s <(dd if="$mnt/$1" bs=1M skip=$((img_size / MiB)) status=none) \
			<(head -c $((lun_size - img_size)) /dev/zero)
}

# copy WHAT LUN CHECK CMD...: fill LUN (unless NOFILL=1), run CMD: it must exit 0 with CHECK passing
# (a truncation zeroes what it cuts, so the tools work; exit 0 with other bytes was the old trap).
copy() {
	local what=$1 lun=$2 check=$3 rc=0 t0 t1
	shift 3
	[[ ${NOFILL:-} == 1 ]] || fill "$lun"
	t0=$(date +%s%N)
	timeout -k 10 120 "$@" >"$work/log" 2>&1 || rc=$?
	t1=$(date +%s%N)
	if ((rc != 0)); then
		fail "$lun: $what exits 0 and the LUN holds the image (exit $rc)"
		note "$work/log"
	elif $check "$lun"; then
		pass "$lun: $what exits 0 and the LUN holds the image ($(((t1 - t0) / 1000000)) ms)"
	else
		fail "$lun: $what exits 0 and the LUN holds the image"
		note "$work/log"
	fi
}

qcow2_equal() {
	timeout -k 10 60 qemu-img compare -f raw -F qcow2 "$src" "$mnt/$1" >"$work/cmp.log" 2>&1
}
all_zero() {
	cmp -s "$mnt/$1" <(head -c "$lun_size" /dev/zero)
}

for lun in lun1 lun2; do
	copy "qemu-img convert -O raw" "$lun" holds qemu-img convert -f raw -O raw "$src" "$mnt/$lun"
	copy "qemu-img convert -O qcow2 -o preallocation=metadata" "$lun" qcow2_equal \
		qemu-img convert -f raw -O qcow2 -o preallocation=metadata "$src" "$mnt/$lun"
	copy "qemu-img create -f raw" "$lun" all_zero qemu-img create -f raw "$mnt/$lun" 32M
	copy "cp" "$lun" holds cp "$src" "$mnt/$lun"
	copy "dd conv=sparse" "$lun" holds dd if="$src" of="$mnt/$lun" bs=64K conv=sparse status=none
	copy "rsync --inplace --sparse" "$lun" holds rsync --inplace --sparse "$src" "$mnt/$lun"
done
if ((failed == 0)); then
	pass "qemu-img compare agrees: lun1 and lun2 hold the image"
	for lun in lun1 lun2; do
		cp "$src" "$mnt/$lun"
		qemu-img compare -f raw -F raw "$src" "$mnt/$lun" >"$work/cmp.log" 2>&1 ||
			{ fail "qemu-img compare -f raw -F raw src $lun after cp"; note "$work/cmp.log"; }
	done
fi
b=$(stat -c %b "$work/tgtd/disk512.img")
if ((b <= 9 * MiB / 512)); then
	pass "thin lun1's backing file keeps only the image's data allocated ($b blocks)"
else
	fail "thin lun1's backing file keeps only the image's data allocated ($b 512-byte blocks, want <= $((9 * MiB / 512)))"
fi

# ---------------------------------------------------------------- one descriptor, unaligned sizes, EFBIG

fill lun1
if out=$(timeout -k 10 60 python3 - "$mnt/lun1" "$lun_size" <<'PY' 2>&1
import errno, os, sys
path, size = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR)
assert os.pread(fd, 4096, 20 << 20) == b"\xee" * 4096, "the pattern before"
os.ftruncate(fd, (20 << 20) + 1000)  # inside a block: its tail is cut too
got = os.pread(fd, 8192, 20 << 20)
assert got[:1000] == b"\xee" * 1000 and got[1000:] == bytes(7192), "cut within a block, read on the same descriptor"
assert os.fstat(fd).st_size == size, "the size stays the capacity: %d" % os.fstat(fd).st_size
assert os.pread(fd, 16, size - 16) == bytes(16), "zeroes up to the end"
assert os.pread(fd, 4096, 16 << 20) == b"\xee" * 4096, "nothing before the cut changes"
os.truncate(path, size)  # to the capacity: changes nothing
assert os.pread(fd, 4096, 16 << 20) == b"\xee" * 4096, "truncating to the capacity changes nothing"
try:
    os.truncate(path, size + 512)
    sys.exit("truncate beyond the capacity succeeded")
except OSError as e:
    assert e.errno == errno.EFBIG, "beyond the capacity: %s" % os.strerror(e.errno)
os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
assert os.pread(fd, 1 << 20, 0) == bytes(1 << 20), "open with O_TRUNC zeroes the LUN"
print("ok")
PY
); then
	pass "lun1: ftruncate within a block zeroes from there on the same descriptor; size kept; EFBIG beyond; O_TRUNC"
else
	fail "lun1: ftruncate within a block zeroes from there on the same descriptor; size kept; EFBIG beyond; O_TRUNC"
	echo "#   $out"
fi

# The cost of zeroing a whole LUN, each kind: the log's own numbers.
for lun in lun1 lun2; do
	fill "$lun"
	n=$(wc -l <"$work/daemon.log")
	: >"$mnt/$lun"
	line=$(tail -n +"$((n + 1))" "$work/daemon.log" | grep "$lun: zeroing after truncate: " | tail -n 1 || true)
	echo "# $lun whole-LUN zeroing: ${line#*zeroing after truncate: }"
done
unmount

# ---------------------------------------------------------------- write-back

# Blocks written but not yet written back, in the range a truncation cuts,
# read as zeroes afterwards, and no later write-back brings them back.
if mount_luns -o writeback; then
	dd if="$work/pattern.raw" of="$mnt/lun1" bs=1M conv=notrunc status=none # dirty in the cache, no fsync
	NOFILL=1 copy "cp under -o writeback" lun1 holds cp "$src" "$mnt/lun1"
	unmount # writes everything back
	if cmp -s -n "$img_size" "$src" "$work/tgtd/disk512.img" &&
		cmp -s <(dd if="$work/tgtd/disk512.img" bs=1M skip=$((img_size / MiB)) status=none) \
			<(head -c $((lun_size - img_size)) /dev/zero); then
		pass "-o writeback: after the unmount lun1's backing file holds the image and zeroes"
	else
		fail "-o writeback: after the unmount lun1's backing file holds the image and zeroes"
	fi
fi


summary
