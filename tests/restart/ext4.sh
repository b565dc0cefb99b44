#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A file system on a LUN file survives worker kills:
#
#   ext4.sh ISERFUSE [KILLS]
#
# mkfs.ext4 on the mounted LUN file, mount -o loop, file copies in a loop
# while the worker is killed with SIGKILL KILLS times (default 4), 3 s
# apart; then every copy compares equal, the loop mount is unmounted and
# e2fsck -fn finds the file system clean.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

if [[ $# -lt 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE [KILLS]" >&2
	exit 2
fi
iserfuse=$1
kills=${2:-4}
need_root "tgtd, FUSE and a loop mount"
need_tools tgtd tgtadm fusermount3 mkfs.ext4 e2fsck losetup pgrep cmp

restart_mounted restart-ext4
pass "mounted"
check "mkfs.ext4 on the LUN file" mkfs.ext4 -q -F "$work/mnt/lun1"
mkdir -p "$work/ext4"
check "mount -o loop" mount -o loop "$work/mnt/lun1" "$work/ext4"
head -c 3M /dev/urandom >"$work/src"

(
	i=0
	while [[ ! -e $work/killer.done ]]; do
		i=$((i + 1))
		cp "$work/src" "$work/ext4/copy$((i % 8))" && sync -f "$work/ext4" || echo "copy $i failed" >>"$work/copy.bad"
		cmp -s "$work/src" "$work/ext4/copy$((i % 8))" || echo "copy $i differs" >>"$work/copy.bad"
	done
	echo "$i" >"$work/copies"
) &
bg=$!

sleep 1
kill_workers "$kills"
touch "$work/killer.done"
wait "$bg" || true
bg=''
check "every kill was followed by a new worker" test ! -s "$work/killer.err"
check "$(cat "$work/copies" 2>/dev/null || echo 0) copies across $kills worker kills: all written and equal" test ! -s "$work/copy.bad"
[[ -s $work/copy.bad ]] && note "$work/copy.bad"
check "umount of the ext4 loop mount" umount "$work/ext4"
e2fsck -fn "$work/mnt/lun1" >"$work/fsck.out" 2>&1 && rc=0 || rc=$?
check_eq "e2fsck -fn: clean" "$rc" 0
((rc == 0)) || note "$work/fsck.out"
unmount_check
summary
