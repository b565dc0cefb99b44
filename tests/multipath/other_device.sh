#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A portal that leads to another device is refused:
#
#   other_device.sh ISERFUSE LUNIDENT_PROBE
#
# Two tgtd processes in common.sh's target namespace with the SAME target
# name and LUN number: one on link A's address with a.img, one on link
# B's with b.img, another size and its own serial number and NAA
# (tgtadm --params scsi_sn=,scsi_id=).  tests/recovery/lunident_probe,
# run in the gateway namespace, first checks that the two really are
# different devices (VPD 0x83/0x80 and capacity, lun_ident.c; its compare
# exits 4 for "differ").  The daemon mounts A with -o portal= for B: B is
# refused (paths_refused 1, paths 1, the "path ... refused:" log line);
# writes through the mount land in a.img only, b.img is unchanged (by
# checksum).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 2 "ISERFUSE LUNIDENT_PROBE" "$@"
need_exe "$1" "$2"
iserfuse=$1
probe=$2
need_root "needs root (network namespaces, tgtd, a mount)"
need_tools ip nsenter tgtd tgtadm dd md5sum fusermount3

mp_init other-device
if ! mp_net; then
	echo "# SKIP: cannot make network namespaces and veth pairs here"
	exit 77
fi
pass "namespaces $ns_gw and $ns_tg joined by links A and B"

if ! mp_tgtd "$work/a.img" 64M "$MP_A:3260" -- "scsi_sn=mpathA0001,scsi_id=mpath-a-0001"; then
	fail "tgtd A on $MP_A:3260 (a.img)"
	summary
	exit 1
fi
if ! mp_tgtd "$work/b.img" 96M "$MP_B:3260" -- "scsi_sn=mpathB0002,scsi_id=mpath-b-0002"; then
	fail "tgtd B on $MP_B:3260 (b.img), the same target name"
	summary
	exit 1
fi
pass "tgtd A on $MP_A:3260 (a.img) and tgtd B on $MP_B:3260 (b.img), both $TGT_IQN LUN 1"
# b.img holds a known pattern, so that "unchanged" means something
dd if=/dev/urandom of="$work/b.img" bs=1M count=8 conv=notrunc status=none
b_before=$(md5sum <"$work/b.img")

for x in A B; do
	a=$MP_A
	[[ $x == B ]] && a=$MP_B
	check "lunident_probe through link $x: $(nsenter --net="/run/netns/$ns_gw" "$probe" save "$a" 3260 "$TGT_IQN" 1 "$work/$x.id" 2>>"$work/probe.err" || true)" \
		test -s "$work/$x.id"
done
rc=0
got=$("$probe" compare "$work/A.id" "$work/B.id" 2>>"$work/probe.err") || rc=$?
echo "# A vs B: $got"
check_eq "the two portals lead to different devices (lunident_probe compare exits 4: they differ)" "$rc" 4
note "$work/probe.err"

if ! mp_mount "iscsi://$MP_A:3260/$TGT_IQN/1" -o "portal=$MP_B:3260,login_timeout=5"; then
	fail "mounted through link A"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mounted through link A"
check_eq "lun1 has A's size (64 MiB)" "$(stat -c %s "$work/mnt/lun1")" $((64 << 20))

check "B refused within 20 s (paths_refused 1)" mp_wait_stat paths_refused 1 20
check_eq ".stats: paths 1" "$(mp_stat paths)" 1
check_eq ".stats: paths_up 1" "$(mp_stat paths_up)" 1
check "the daemon logged 'path $MP_B:3260 refused: ...'" grep -q "path $MP_B:3260 refused: " "$work/daemon.log"
grep "refused: " "$work/daemon.log" | sed 's/^/# daemon: /' || true

# 4 MiB at offset 1 MiB through the mount, direct, then read back from the backing files.
dd if=/dev/urandom of="$work/pattern" bs=1M count=4 status=none
check "4 MiB written through the mount" dd if="$work/pattern" of="$work/mnt/lun1" bs=1M seek=1 oflag=direct conv=notrunc,fsync status=none
want=$(md5sum <"$work/pattern")
check_eq "a.img holds the data written" "$(dd if="$work/a.img" bs=1M skip=1 count=4 status=none | md5sum)" "$want"
check_eq "b.img is unchanged (by checksum)" "$(md5sum <"$work/b.img")" "$b_before"
check_eq "reading back through the mount gives the data" \
	"$(dd if="$work/mnt/lun1" bs=1M skip=1 count=4 iflag=direct status=none | md5sum)" "$want"

check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
