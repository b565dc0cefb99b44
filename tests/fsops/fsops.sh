#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "fsops" suite: fallocate, SEEK_DATA/SEEK_HOLE, O_DIRECT and the
# qemu-img / qemu-io workflows on a real mount of a thin-provisioned tgtd.
#
#   fsops.sh ISERFUSE_BINARY
#
# tgtd serves LUN 1 (32 MiB, 512-byte blocks) and LUN 2 (32 MiB, 4096-byte
# blocks) with thin_provisioning=1 (UNMAP, WRITE SAME with UNMAP, GET LBA
# STATUS, LBPRZ), and LUN 3 (32 MiB, 512-byte blocks) without.  Checks:
# fsops_check.py on each LUN (punching a hole shrinks the backing file,
# unaligned edges, zero range, SEEK_DATA/SEEK_HOLE equal to the backing
# file's, other modes EOPNOTSUPP, misaligned O_DIRECT EINVAL); qemu-img
# info/convert/compare/map/measure/check, qcow2 created and converted onto
# a LUN, convert -t none -T none, dd; qemu-io discard reading back zeroes;
# the fallback to WRITEs of zeroes against tests/malicious/fake_target.py
# (no WRITE SAME), for a truncation too; fallocate refused and lseek
# working on a -o ro mount;
# fsops_names.py: names that cannot be made or removed (EPERM, EROFS on
# the -o ro mount), mode, owner and times kept, mtime and ctime following
# writes, punches and zero ranges.
# with -o writeback, SEEK_DATA/SEEK_HOLE count data not yet written back
# and a punch over it leaves a hole in the backing file; df: a thin LUN's
# free space is what the target deallocated (a punch grows it), a thick
# LUN shows 0 used.
#
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root, 2 on bad usage.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
need_exe "$1"
iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
need_root "the fsops suite mounts FUSE and runs tgtd, which needs root"
for tool in tgtd tgtadm fusermount3 qemu-img qemu-io python3 timeout cmp; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		fail "tool $tool installed"
		summary
		exit 1
	fi
done

MiB=$((1024 * 1024))
size=$((32 * MiB))
work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-fsops.XXXXXX")
mnt=$work/mnt
mnt2=$work/mnt2
mkdir -p "$mnt" "$mnt2"
daemon_pid='' daemon2_pid='' fake_pid=''
# A sanitizer build writes its reports here (checked at exit).
sanitizer_logs "$work"

is_mounted() {
	grep -qF " $1 " /proc/mounts
}

# unmounted WHAT DIR PID: fusermount3 -u DIR, and the daemon PID (not a
# child: it forked away) is gone within 20 s.
unmounted() {
	local rc=0
	fusermount3 -u "$2" 2>"$work/umount.err" || rc=$?
	if ((rc == 0)) && [[ -n $3 ]] && _targets_wait_gone "$3" 20; then
		pass "$1: unmounted, the daemon (${3:-not found}) exits"
	else
		fail "$1: unmounted, the daemon (${3:-not found}) exits (fusermount3 -u: $rc)"
		note "$work/umount.err"
	fi
}

cleanup() {
	local rc=$?
	set +e
	for m in "$mnt" "$mnt2"; do
		if is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null
		fi
	done
	[[ -n $daemon_pid ]] && _targets_kill "$daemon_pid" 5
	[[ -n $daemon2_pid ]] && _targets_kill "$daemon2_pid" 5
	[[ -n $fake_pid ]] && _targets_kill "$fake_pid" 5
	tgtd_stop "$work/tgtd"
	sanitizer_check || rc=1
	if is_mounted "$mnt" || is_mounted "$mnt2"; then
		echo "# $mnt is still mounted: $work left in place"
	elif ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		rm -f "$work"/tgtd/*.img "$work"/*.raw
		echo "# logs kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run WHAT CMD...: CMD's output to $work/log; returns its exit status (bounded in time).
run() {
	local rc=0
	shift
	timeout -k 10 120 "$@" >"$work/log" 2>&1 || rc=$?
	return "$rc"
}
# expect_ok WHAT CMD...: CMD exits 0.
expect_ok() {
	local what=$1 rc=0
	run "$@" || rc=$?
	if ((rc == 0)); then pass "$what"; else fail "$what (exit $rc)"; note "$work/log"; fi
	return "$rc"
}
blocks() {
	stat -c %b "$1"
}

# ---------------------------------------------------------------- target

if ! tgtd_start "$work/tgtd" 32M 32M >/dev/null 2>"$work/log"; then
	fail "tgtd starts"
	note "$work/log"
	exit 1
fi
ctl=$(<"$work/tgtd/ctl")
truncate -s 32M "$work/tgtd/thick.img"
if _tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 3 -b "$work/tgtd/thick.img" >"$work/log" 2>&1 &&
	_tgtadm "$ctl" --op update --mode logicalunit --tid 1 --lun 1 --params thin_provisioning=1 >>"$work/log" 2>&1 &&
	_tgtadm "$ctl" --op update --mode logicalunit --tid 1 --lun 2 --params thin_provisioning=1 >>"$work/log" 2>&1 &&
	[[ $(_tgtadm "$ctl" --op show --mode target | grep -c 'Thin-provisioning: Yes') == 2 ]]; then
	pass "tgtd: LUN 1 and 2 thin provisioned, LUN 3 not"
else
	fail "tgtd: LUN 1 and 2 thin provisioned, LUN 3 not"
	note "$work/log"
	exit 1
fi

if ! timeout -k 10 120 "$iserfuse" -o initiator_name=iqn.2026-11.org.example:fsops "$TGT_URL" "$mnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null || ! is_mounted "$mnt"; then
	fail "mount $TGT_URL"
	note "$work/mount.err"
	exit 1
fi
daemon_pid=$(pgrep -nf -- "$iserfuse .*$mnt" || true)
pass "mount $TGT_URL"

# ---------------------------------------------------------------- syscalls

# py_checks ARGS: fsops_check.py (PY=fsops_names.py: that one) ARGS, its "ok"/"not ok" lines counted.
py_checks() {
	local out=$work/py.out rc=0 py=${PY:-fsops_check.py}
	timeout -k 10 120 python3 "$here/$py" "$@" >"$out" 2>&1 || rc=$?
	cat "$out"
	passed=$((passed + $(grep -c '^ok - ' "$out" || true)))
	failed=$((failed + $(grep -c '^not ok - ' "$out" || true)))
	if ((rc != 0)) && ! grep -q '^not ok - ' "$out"; then
		fail "$py $* (exit $rc)"
	fi
}
py_checks "$mnt/lun1" "$work/tgtd/disk512.img" 512 thin
py_checks "$mnt/lun2" "$work/tgtd/disk4k.img" 4096 thin
py_checks "$mnt/lun3" "$work/tgtd/thick.img" 512 thick

# ---------------------------------------------------------------- names and attributes

PY=fsops_names.py py_checks "$mnt" lun3 rw

# ---------------------------------------------------------------- qemu-img

# A sparse source: 1 MiB of data at 0, 2 MiB at 8 MiB, 512 KiB at 20 MiB, holes between.
src=$work/src.raw
truncate -s 32M "$src"
head -c $((1 * MiB)) /dev/urandom | dd of="$src" conv=notrunc status=none
head -c $((2 * MiB)) /dev/urandom | dd of="$src" bs=1M seek=8 conv=notrunc status=none
head -c $((512 * 1024)) /dev/urandom | dd of="$src" bs=512K seek=40 conv=notrunc status=none

# lun1 starts fully allocated, so converting the sparse source onto it must deallocate.
dd if=/dev/urandom of="$mnt/lun1" bs=1M count=32 conv=fsync status=none
expect_ok "qemu-img convert -n -O raw onto lun1" qemu-img convert -n -f raw -O raw "$src" "$mnt/lun1" || true
expect_ok "qemu-img compare: source equals lun1" qemu-img compare -f raw -F raw "$src" "$mnt/lun1" || true
if cmp -s "$src" "$work/tgtd/disk512.img"; then
	pass "lun1's backing file equals the source"
else
	fail "lun1's backing file equals the source"
fi
b=$(blocks "$work/tgtd/disk512.img")
if ((b <= 8 * MiB / 512)); then
	pass "the source's holes are holes in lun1's backing file ($b blocks)"
else
	fail "the source's holes are holes in lun1's backing file ($b 512-byte blocks, want <= $((8 * MiB / 512)))"
fi

if run info qemu-img info -f raw --output=json "$mnt/lun1" &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["virtual-size"]==int(sys.argv[2]) and d["format"]=="raw" else 1)' \
		"$work/log" "$size"; then
	pass "qemu-img info: lun1 is raw, virtual size 32 MiB"
else
	fail "qemu-img info: lun1 is raw, virtual size 32 MiB"
	note "$work/log"
fi

# map and measure go by SEEK_DATA/SEEK_HOLE: the mount must say what the backing file says.
qemu-img map -f raw --output=json "$mnt/lun1" >"$work/map.mnt" 2>&1 || true
qemu-img map -f raw --output=json "$work/tgtd/disk512.img" >"$work/map.backing" 2>&1 || true
qemu-img map -f raw --output=json "$src" >"$work/map.src" 2>&1 || true
if cmp -s "$work/map.mnt" "$work/map.backing" && grep -q '"data": false' "$work/map.mnt"; then
	pass "qemu-img map of lun1 equals the backing file's (with holes)"
else
	fail "qemu-img map of lun1 equals the backing file's (with holes)"
	diff "$work/map.mnt" "$work/map.backing" | head -n 20 | sed 's/^/#   /'
fi
if python3 - "$work/map.mnt" "$work/map.src" <<'PY'
import json, sys
def data(path):
    return [(e["start"], e["start"] + e["length"]) for e in json.load(open(path)) if e["data"]]
mnt, src = data(sys.argv[1]), data(sys.argv[2])
sys.exit(0 if all(any(a <= s and e <= b for a, b in mnt) for s, e in src) else 1)
PY
then
	pass "qemu-img map: lun1's data extents cover the source's"
else
	fail "qemu-img map: lun1's data extents cover the source's"
fi
m1=$(qemu-img measure -O qcow2 -f raw "$mnt/lun1" 2>&1 | grep '^required size' || true)
m2=$(qemu-img measure -O qcow2 -f raw "$work/tgtd/disk512.img" 2>&1 | grep '^required size' || true)
check_eq "qemu-img measure of lun1 equals the backing file's" "$m1" "$m2"
if [[ $m1 =~ ([0-9]+) ]] && ((BASH_REMATCH[1] < 8 * MiB)); then
	pass "qemu-img measure counts only allocated data ($m1)"
else
	fail "qemu-img measure counts only allocated data ($m1)"
fi

# qcow2 created, then converted onto lun2.
expect_ok "qemu-img create -f qcow2 on lun2" qemu-img create -f qcow2 "$mnt/lun2" 16M || true
if run check qemu-img check -f qcow2 "$mnt/lun2" && grep -q 'No errors were found' "$work/log"; then
	pass "qemu-img check: new qcow2 on lun2 has no errors"
else
	fail "qemu-img check: new qcow2 on lun2 has no errors"
	note "$work/log"
fi
expect_ok "qemu-img convert -O qcow2 onto lun2" qemu-img convert -f raw -O qcow2 "$src" "$mnt/lun2" || true
if run check qemu-img check -f qcow2 "$mnt/lun2" && grep -q 'No errors were found' "$work/log"; then
	pass "qemu-img check: converted qcow2 on lun2 has no errors"
else
	fail "qemu-img check: converted qcow2 on lun2 has no errors"
	note "$work/log"
fi
expect_ok "qemu-img compare: source equals the qcow2 on lun2" \
	qemu-img compare -f raw -F qcow2 "$src" "$mnt/lun2" || true

# O_DIRECT on both sides: lun1 -> lun3.
dd if=/dev/urandom of="$mnt/lun3" bs=1M count=32 conv=fsync status=none
expect_ok "qemu-img convert -t none -T none lun1 -> lun3" \
	qemu-img convert -t none -T none -n -f raw -O raw "$mnt/lun1" "$mnt/lun3" || true
if cmp -s "$src" "$work/tgtd/thick.img"; then
	pass "lun3's backing file equals the source after convert -t none"
else
	fail "lun3's backing file equals the source after convert -t none"
fi

# qemu-img dd: 3 MiB from 7 MiB of lun1 into a local file (qemu-img 7.2
# counts the skipped blocks in count=).
expect_ok "qemu-img dd from lun1" qemu-img dd -f raw -O raw bs=64k skip=112 count=160 \
	"if=$mnt/lun1" "of=$work/dd.raw" || true
if cmp -s "$work/dd.raw" <(dd if="$src" bs=64k skip=112 count=48 status=none); then
	pass "qemu-img dd copied the right 3 MiB"
else
	fail "qemu-img dd copied the right 3 MiB"
fi

# ---------------------------------------------------------------- qemu-io discard

before=$(blocks "$work/tgtd/disk512.img")
expect_ok "qemu-io discard 8M 2M on lun1" qemu-io -f raw -c 'discard 8M 2M' "$mnt/lun1" || true
after=$(blocks "$work/tgtd/disk512.img")
if ((after <= before - 2 * MiB / 512)); then
	pass "qemu-io discard freed 2 MiB of lun1's backing file ($before -> $after blocks)"
else
	fail "qemu-io discard freed 2 MiB of lun1's backing file ($before -> $after blocks)"
fi
if run qemu-io-read qemu-io -f raw -c 'read -P 0 8M 2M' -c 'read -P 0 7680k 512k' "$mnt/lun1" &&
	! grep -qi 'fail\|error' "$work/log" && [[ $(grep -c '^read ' "$work/log") == 2 ]]; then
	pass "qemu-io: the discarded range reads as zeroes"
else
	fail "qemu-io: the discarded range reads as zeroes"
	note "$work/log"
fi
if cmp -s <(dd if="$work/tgtd/disk512.img" bs=1M skip=8 count=2 status=none) <(head -c $((2 * MiB)) /dev/zero); then
	pass "lun1's backing file holds zeroes where qemu-io discarded"
else
	fail "lun1's backing file holds zeroes where qemu-io discarded"
fi
if run qemu-io-read qemu-io -f raw -c 'discard 4096 1000' -c 'read -P 0 4096 1000' "$mnt/lun1" &&
	! grep -qi 'fail\|error' "$work/log"; then
	pass "qemu-io: an unaligned discard reads back as zeroes"
else
	fail "qemu-io: an unaligned discard reads back as zeroes"
	note "$work/log"
fi

# ---------------------------------------------------------------- a target without WRITE SAME

# tests/malicious/fake_target.py, behaving: no VPD 0xB0/0xB2, no LBPME, and
# ILLEGAL REQUEST (invalid opcode) for WRITE SAME(16): punching and zeroing
# fall back to WRITEs of zeroes, and the whole LUN is data.
fake_py=$here/../malicious/fake_target.py
for _ in 1 2 3 4 5; do
	port=$(free_port)
	python3 "$fake_py" --port "$port" >"$work/fake.log" 2>&1 </dev/null &
	fake_pid=$!
	_targets_wait_listen "$fake_pid" "$port" 10 && break
	_targets_kill "$fake_pid" 2
	fake_pid=''
done
if [[ -n $fake_pid ]] && timeout -k 10 120 "$iserfuse" -o initiator_name=iqn.2026-11.org.example:fsops \
	"iscsi://127.0.0.1:$port/iqn.2026-11.org.example:malicious/1" "$mnt2" \
	>"$work/mount2.out" 2>"$work/mount2.err" </dev/null && is_mounted "$mnt2"; then
	daemon2_pid=$(pgrep -nf -- "$iserfuse .*$mnt2" || true)
	python3 "$fake_py" --dump 0 $((1024 * 1024)) >"$work/fake.expected"
	if out=$(timeout -k 10 60 python3 - "$mnt2/lun1" "$work/fake.expected" <<'PY' 2>&1
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
want = bytearray(open(sys.argv[2], "rb").read())
fd = os.open(sys.argv[1], os.O_RDWR)
for mode, off, n in ((0x03, 1000, 300000), (0x10, 400000, 70000), (0x03, 600 * 512, 100 * 512)):
    if libc.fallocate(fd, mode, off, n) != 0:
        sys.exit("fallocate mode %#x %d+%d: %s" % (mode, off, n, os.strerror(ctypes.get_errno())))
    want[off:off + n] = bytes(n)
os.ftruncate(fd, 700001)  # zeroes the rest, size kept
want[700001:] = bytes(len(want) - 700001)
if os.fstat(fd).st_size != len(want):
    sys.exit("size after ftruncate: %d" % os.fstat(fd).st_size)
got = os.pread(fd, len(want) + 1, 0)
if got != bytes(want):
    sys.exit("content differs at byte %d" % next(i for i in range(len(want)) if got[i] != want[i]))
seeks = (os.lseek(fd, 5000, os.SEEK_DATA), os.lseek(fd, 5000, os.SEEK_HOLE))
if seeks != (5000, len(want)):
    sys.exit("SEEK_DATA/SEEK_HOLE from 5000: %s, want all data" % (seeks,))
PY
	); then
		pass "no WRITE SAME, no LBP: punch, zero range and truncate write zeroes (unaligned too), all data for lseek"
	else
		fail "no WRITE SAME, no LBP: punch, zero range and truncate write zeroes (unaligned too), all data for lseek"
		echo "#   $out"
	fi
	unmounted "the fake target's mount" "$mnt2" "$daemon2_pid"
	daemon2_pid=''
else
	fail "mount the fake target"
	note "$work/fake.log"
	note "$work/mount2.err"
fi
[[ -n $fake_pid ]] && _targets_kill "$fake_pid" 5
fake_pid=''

# ---------------------------------------------------------------- read-only

unmounted "the first mount" "$mnt" "$daemon_pid"
daemon_pid=''
if timeout -k 10 120 "$iserfuse" -o ro -o initiator_name=iqn.2026-11.org.example:fsops "$TGT_URL/1" "$mnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null && is_mounted "$mnt"; then
	daemon_pid=$(pgrep -nf -- "$iserfuse .*$mnt" || true)
	out=$(python3 - "$mnt/lun1" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
try:
    fd = os.open(sys.argv[1], os.O_RDWR)
    print("open-rw-ok")
except OSError as e:
    print("open", os.strerror(e.errno))
fd = os.open(sys.argv[1], os.O_RDONLY)
print("data", os.lseek(fd, 0, os.SEEK_DATA), "hole", os.lseek(fd, 0, os.SEEK_HOLE))
PY
) || true
	check_eq "-o ro: opening for writing (needed to fallocate) is EROFS; lseek works" "$out" \
		"open Read-only file system
data 0 hole 1048576"
	PY=fsops_names.py py_checks "$mnt" lun1 ro
else
	fail "mount -o ro $TGT_URL/1"
	note "$work/mount.err"
fi
unmounted "-o ro" "$mnt" "$daemon_pid"
daemon_pid=''

# ---------------------------------------------------------------- write-back cache

# Data written but not yet written back is data for SEEK_DATA/SEEK_HOLE (a
# copier that skips holes would lose it), and a punch over such data
# leaves a hole on the target (no later write-back allocates it again).
if timeout -k 10 120 "$iserfuse" -o writeback -o initiator_name=iqn.2026-11.org.example:fsops "$TGT_URL" "$mnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null && is_mounted "$mnt"; then
	daemon_pid=$(pgrep -nf -- "$iserfuse .*$mnt" || true)
	out=$(timeout -k 10 60 python3 - "$mnt/lun2" "$work/tgtd/disk4k.img" <<'PY' 2>&1
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
M = 1 << 20
fd = os.open(sys.argv[1], os.O_RDWR)
if libc.fallocate(fd, 0x03, 24 * M, 8 * M) != 0:
    sys.exit("punch 24M+8M: %s" % os.strerror(ctypes.get_errno()))
os.fsync(fd)
data = os.urandom(128 * 1024)
os.pwrite(fd, data, 25 * M)  # whole 64 KiB cache blocks: kept dirty, not on the target yet
rd = os.open(sys.argv[1], os.O_RDONLY)  # a copier's own descriptor, the writer still open
d, h = os.lseek(rd, 24 * M, os.SEEK_DATA), os.lseek(rd, 25 * M, os.SEEK_HOLE)
print("seek", d == 25 * M and h >= 25 * M + len(data), d, h)
print("read", os.pread(rd, len(data), 25 * M) == data)
os.pwrite(fd, os.urandom(M), 28 * M)  # dirty, then punched before any write-back
if libc.fallocate(fd, 0x03, 28 * M, M) != 0:
    sys.exit("punch 28M+1M: %s" % os.strerror(ctypes.get_errno()))
os.fsync(fd)
print("zeroes", os.pread(rd, M, 28 * M) == bytes(M))
b = os.open(sys.argv[2], os.O_RDONLY)
try:
    bd = os.lseek(b, 28 * M, os.SEEK_DATA)
except OSError:
    bd = 32 * M
print("backing_hole", bd >= 29 * M, bd)
PY
	) || true
	check_eq "-o writeback: SEEK_DATA/SEEK_HOLE see data not yet written back; a punch over it leaves a hole on the target" \
		"$(awk '{print $1, $2}' <<<"$out")" "seek True
read True
zeroes True
backing_hole True"
	echo "# $(tr '\n' ' ' <<<"$out")"
	unmounted "-o writeback" "$mnt" "$daemon_pid"
	daemon_pid=''
else
	fail "mount -o writeback $TGT_URL"
	note "$work/mount.err"
fi

# ---------------------------------------------------------------- df

# statfs (df): the LUN's capacity; free space on a thin LUN is what GET LBA
# STATUS reports deallocated, which tgtd takes from the backing file's
# holes; a fully provisioned LUN shows 0 used.
# A figure is measured again at most every 3 s: the check polls.
# df_free MNT: free bytes of the mount (f_bfree * f_frsize).
df_free() { python3 -c 'import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bfree*s.f_frsize, s.f_blocks*s.f_frsize)' "$1"; }
# df_until MNT WANT: poll up to 10 s until "FREE TOTAL" is WANT; prints the last.
df_until() {
	local got i
	for ((i = 0; i < 100; i++)); do
		got=$(df_free "$1") && [[ $got == "$2" ]] && break
		sleep 0.1
	done
	printf '%s\n' "$got"
}
# backing_free FILE: the bytes of FILE's first $size that are holes, found
# as tgtd finds them for GET LBA STATUS (SEEK_DATA/SEEK_HOLE); du would
# also count the file system's own extent blocks.
backing_free() {
	python3 - "$1" "$size" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
end, off, holes = int(sys.argv[2]), 0, 0
while off < end:
    try:
        data = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        data = end
    data = min(data, end)
    holes += data - off
    if data >= end:
        break
    off = min(os.lseek(fd, data, os.SEEK_HOLE), end)
print(holes)
PY
}
# mount_lun URL: a mount of URL on $mnt, its daemon in $daemon_pid; unmount_lun: gone again.
mount_lun() {
	timeout -k 10 120 "$iserfuse" -o initiator_name=iqn.2026-11.org.example:fsops "$1" "$mnt" \
		>"$work/mount.out" 2>"$work/mount.err" </dev/null && is_mounted "$mnt" || return 1
	daemon_pid=$(pgrep -nf -- "$iserfuse .*$mnt" || true)
}
unmount_lun() {
	unmounted "the df mount" "$mnt" "$daemon_pid"
	daemon_pid=''
}
if mount_lun "$TGT_URL/1"; then
	dd if=/dev/urandom of="$mnt/lun1" bs=1M count=12 conv=notrunc,fsync status=none
	want=$(backing_free "$work/tgtd/disk512.img")
	check "thin lun1: 12 MiB written, the backing file holds at least that ($want bytes free)" test "$want" -le $((20 * MiB))
	check_eq "thin lun1: df's free space is what the target has deallocated" "$(df_until "$mnt" "$want $size")" "$want $size"
	fallocate -p -o $((2 * MiB)) -l $((4 * MiB)) "$mnt/lun1"
	want2=$(backing_free "$work/tgtd/disk512.img")
	check_eq "thin lun1: a 4 MiB punch frees 4 MiB on the target" "$want2" $((want + 4 * MiB))
	check_eq "thin lun1: df's free space grows by the punch" "$(df_until "$mnt" "$want2 $size")" "$want2 $size"
	unmount_lun
else
	fail "mount $TGT_URL/1 for df"
	note "$work/mount.err"
fi
if mount_lun "$TGT_URL/3"; then
	dd if=/dev/urandom of="$mnt/lun3" bs=1M count=8 conv=notrunc,fsync status=none
	check_eq "thick lun3 with 8 MiB written: df shows 0 used" "$(df_free "$mnt")" "$size $size"
	check_eq "thick lun3: df's Use% is 0%" "$(df --output=pcent "$mnt" | tail -n 1 | tr -d ' ')" "0%"
	unmount_lun
else
	fail "mount $TGT_URL/3 for df"
	note "$work/mount.err"
fi

summary
