#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Every path down for longer than replacement_timeout, then one back:
#
#   all_down.sh ISERFUSE
#
# tgtd on both links of common.sh; the daemon mounts through link A with
# -o portal= for link B (with accept_unlisted_portals: tgtd's SendTargets
# names only the portal asked and its designators are not globally
# unique), replacement_timeout=3 (and noop_interval=1,
# noop_timeout=2, so that even a single path notices in about 3 s).  A
# known 1 MiB is written, both links go down, and a direct dd read must
# fail with EIO (exit status and the kernel's "Input/output error") once
# replacement_timeout has passed, and within 2 s of it.  Then ONE link
# comes back, B (the portal= one): reads work again within 20 s (by the
# clock) and return the data written (by checksum).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "needs root (network namespaces, tgtd, a mount)"
need_tools ip nsenter tgtd tgtadm dd md5sum fusermount3

mp_init all-down
if ! mp_net; then
	echo "# SKIP: cannot make network namespaces and veth pairs here"
	exit 77
fi
pass "namespaces $ns_gw and $ns_tg joined by links A and B"
if ! mp_tgtd "$work/disk.img" 64M "$MP_A:3260" "$MP_B:3260"; then
	fail "tgtd on $MP_A:3260 and $MP_B:3260"
	summary
	exit 1
fi
pass "tgtd on $MP_A:3260 and $MP_B:3260"
if ! mp_mount "iscsi://$MP_A:3260/$TGT_IQN/1" \
	-o "portal=$MP_B:3260,accept_unlisted_portals,login_timeout=5,replacement_timeout=3,noop_interval=1,noop_timeout=2"; then
	fail "mounted through link A"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mounted through link A"
check "both paths up within 20 s (paths_up 2)" mp_wait_stat paths_up 2 20

dd if=/dev/urandom of="$work/pattern" bs=1M count=1 status=none
want=$(md5sum <"$work/pattern")
check "1 MiB written at 2 MiB" dd if="$work/pattern" of="$work/mnt/lun1" bs=1M seek=2 oflag=direct conv=notrunc,fsync status=none

t0=$(mp_now_ms) # before either link goes down: no path is usable from a moment after it
mp_link A down
mp_link B down
sleep 1
rc=0
timeout 60 dd if="$work/mnt/lun1" of=/dev/null bs=4k count=1 skip=$((3 << 8)) iflag=direct 2>"$work/dd.err" || rc=$?
t1=$(mp_now_ms)
echo "# with both links down the read ended after $((t1 - t0)) ms: exit $rc: $(tr '\n' ' ' <"$work/dd.err")"
check "a read with both links down fails (dd exit $rc, not 0 and not timeout's 124)" test "$rc" -ne 0 -a "$rc" -ne 124
check "... with the kernel's EIO (Input/output error)" grep -q "Input/output error" "$work/dd.err"
check "... only after replacement_timeout (3 s, less 0.1 s for the timer; $((t1 - t0)) ms)" test $((t1 - t0)) -ge 2900
check "... and within 2 s of it ($((t1 - t0)) ms <= 5000 ms)" test $((t1 - t0)) -le 5000
check_eq ".stats: paths_up 0" "$(mp_stat paths_up)" 0

back=B
mp_link "$back" up
t2=$(mp_now_ms)
ok=0
while (($(mp_now_ms) - t2 < 20000)); do
	if got=$(timeout 20 dd if="$work/mnt/lun1" bs=1M skip=2 count=1 iflag=direct status=none 2>/dev/null | md5sum) &&
		[[ $got == "$want" ]]; then
		ok=1
		break
	fi
	sleep 0.1
done
t3=$(mp_now_ms)
echo "# reads work again $((t3 - t2)) ms after link $back came back"
check "reads work again within 20 s of link $back coming back ($((t3 - t2)) ms)" test "$ok" -eq 1 -a $((t3 - t2)) -le 20000
check_eq "... and return the data written (by checksum)" "${got:-none}" "$want"
check_eq ".stats: paths_up 1" "$(mp_stat paths_up)" 1
grep -E 'path .* (down \(|up again after)|replacement timeout' "$work/daemon.log" | sed 's/^/# daemon: /' || true
mp_link A up
mp_link B up
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
