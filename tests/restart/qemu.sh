#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A QEMU guest on the LUN file outlives the worker:
#
#   qemu.sh ISERFUSE [KILLS]
#
# The lab guest (tests/lab/run-in-guest.sh, TCG) gets the mounted LUN as a
# virtio-blk disk with cache=none (-d) and runs qemu-guest.py on it: rounds
# of O_DIRECT writes of a pattern stamped with round and offset into every
# 4 KiB block, a flush, the read-back compared, for 25 s and until the host
# is done, beside a steady fio load (QD32) on the disk's second half.
# Meanwhile the worker is killed with SIGKILL KILLS times (default 3), 3 s
# or more apart, each time until a new worker serves.  The guest's script
# must exit 0 with every round verified, the guest's kernel log must hold
# no error on the disk, the kernel must have resent requests, .stats must
# count the restarts, the mount must stay.  Skips when qemu-system-x86_64,
# busybox, cpio or a kernel in /boot (the lab's) are missing.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

if [[ $# -lt 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE [KILLS]" >&2
	exit 2
fi
iserfuse=$1
kills=${2:-3}
need_root "tgtd, FUSE and the QEMU lab"
for t in qemu-system-x86_64 /bin/busybox cpio; do
	if ! command -v "$t" >/dev/null 2>&1; then
		echo "# SKIP: the QEMU lab needs $t (tests/lab/README.md)"
		exit 77
	fi
done
if ! compgen -G '/boot/vmlinuz-*' >/dev/null; then
	echo "# SKIP: the QEMU lab needs a kernel in /boot (linux-image-amd64)"
	exit 77
fi
need_tools tgtd tgtadm fusermount3 python3 pgrep fio

restart_mounted restart-qemu
pass "mounted"
check "a worker runs under the supervisor" test -n "$(worker_pid)"

# The guest, in the background: its output in guest.out, the lab's lines in
# lab.err, its scratch (started, host.done, .lab/dmesg.txt) in $work/lab.
mkdir -p "$work/lab"
bash "$here/../lab/run-in-guest.sh" -t 110 -m 1024 -o "$work/lab" -d "$work/mnt/lun1" -C / \
	"modprobe virtio_blk && python3 '$here/qemu-guest.py' /dev/vda /lab 25" >"$work/guest.out" 2>"$work/lab.err" &
bg=$!
for ((i = 0; i < 1200; i++)); do
	[[ -e $work/lab/started ]] && break
	kill -0 "$bg" 2>/dev/null || break
	sleep 0.1
done
if [[ ! -e $work/lab/started ]]; then
	fail "the guest starts its I/O"
	note "$work/lab.err"
	note "$work/guest.out"
	summary
	exit 1
fi
pass "the guest started its I/O"

sleep 2
kill_workers "$kills"
touch "$work/lab/host.done"
grc=0
wait "$bg" || grc=$?
bg=''
check_eq "the guest's script exits 0" "$grc" 0
((grc == 0)) || note "$work/lab.err"
tail -n 3 "$work/guest.out" | sed 's/^/# guest: /'
grep -q 'rounds verified,' "$work/guest.out" || fail "the guest's closing line (rounds verified)"
check "every kill was followed by a new worker" test ! -s "$work/killer.err"
note "$work/killer.err"
# 6.1: "I/O error, dev vda, sector ..."; older: "blk_update_request: I/O error, dev vda"
if [[ -s $work/lab/.lab/dmesg.txt ]]; then
	errs=$(grep -ciE 'blk_update_request|error.*\bvda\b|\bvda\b.*error' "$work/lab/.lab/dmesg.txt" || true)
	check_eq "no error on vda in the guest's kernel log" "$errs" 0
	grep -iE 'blk_update_request|error.*\bvda\b|\bvda\b.*error' "$work/lab/.lab/dmesg.txt" | head -n 5 | sed 's/^/#   /' || true
else
	fail "the guest's kernel log came back"
fi
check_eq "restarts logged" "$(restarts_logged)" "$kills"
resent=$(sed -n 's/^requests_resent //p' "$work/mnt/.stats" 2>/dev/null || true)
echo "# requests resent over the $kills kills: ${resent:-?}"
sed -n 's/.*serves the mount: .*; \([0-9]*\) ms without a worker; \([0-9]*\) requests resent.*/# without a worker \1 ms, \2 requests resent/p' "$work/daemon.log"
check "the kernel resent requests a dead worker had read (.stats requests_resent ${resent:-?})" test "${resent:-0}" -gt 0
check "the mount is still there" is_mounted "$work/mnt"
check_eq ".stats counts the restarts" "$(sed -n 's/^worker_restarts //p' "$work/mnt/.stats" 2>/dev/null || true)" "$kills"
check "the supervisor still runs" kill -0 "$daemon"
unmount_check
summary
