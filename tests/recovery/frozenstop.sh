#!/bin/bash
# SPDX-License-Identifier: MIT
#
# SIGTERM while a FUSE handler waits on the target:
#
#   frozenstop.sh ISERFUSE
#
# tgtd stops answering (SIGSTOP), an O_DIRECT write of block 0 goes out
# and stays unanswered, and a second O_DIRECT write of the same block
# then waits in a FUSE reader for the first (writes over the same blocks
# never overlap in flight).  SIGTERM must end the daemon within the stop
# grace (5 s) plus a few seconds, exit status 0 (the earlier write was
# flushed at its close), both writes failed with EIO: the stop grace
# starts when the FUSE loop ends, not after every handler returned (a
# handler waiting on the target kept the stop waiting for the keep-alive's
# drop, and then for a target that came back or the replacement timeout).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "needs root (tgtd, FUSE)"

tgtd_mounted frozenstop
pass "mounted"

check "a write with the target answering" \
	dd if=/dev/zero of="$work/mnt/lun1" bs=4k count=1 oflag=direct conv=notrunc status=none

tpid=$(cat "$work/tgtd/pid")
kill -STOP "$tpid"
# two writes of block 0 in flight at once, from two processes (libaio: no lock held across them)
fio --name=frozen --filename="$work/mnt/lun1" --ioengine=libaio --direct=1 --rw=write --bs=4k --size=4k \
	--numjobs=2 --output="$work/frozen.fio" 2>/dev/null &
worker=$!
sleep 1
sigterm_within_grace
if [[ -n $drc ]]; then check_eq "exit status 0 (what was acknowledged reached the target: the failed writes said so)" "$drc" 0; fi
kill -CONT "$tpid"
frc=0
wait "$worker" 2>/dev/null || frc=$?
worker=''
check "the writes failed (fio's exit status $frc)" test "$frc" -ne 0
check_eq "both failed with EIO" "$(grep -c 'err= 5' "$work/frozen.fio" || true)" 2
force_unmount "$work/mnt"
summary
