#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A worker that served FUSE over io_uring cannot be replaced:
#
#   uring.sh ISERFUSE
#
# The kernel keeps queueing requests on the rings the dead worker
# registered, where no new worker can take them: instead of a mount that
# hangs, the supervisor says so in one line, removes the mount and exits 1;
# fio's I/O in flight fails, it does not hang.  Sets
# /sys/module/fuse/parameters/enable_uring to Y for the mount only and
# puts back what it found.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 fio pgrep
param=/sys/module/fuse/parameters/enable_uring
if [[ ! -w $param ]]; then
	echo "# SKIP: no FUSE over io_uring in this kernel ($param)"
	exit 77
fi
uring_was=$(cat "$param") # put back by suite_teardown (common.sh) too
echo Y >"$param"
restart_mounted restart-uring -o io_uring=on
echo "$uring_was" >"$param"
check_eq "the mount serves over the rings" "$(sed -n 's/^fuse_path //p' "$work/mnt/.stats")" io_uring
# a restart asked for is refused: the rings cannot be taken over, and the mount must not end for it
restart_rc=0
"$iserfuse" --restart "$work/mnt" 2>"$work/restart.err" || restart_rc=$?
check_eq "--restart over the rings: refused (exit 1)" "$restart_rc" 1
check "... with one line saying why" grep -q 'io_uring' "$work/restart.err"
check "... the mount stays, the worker serving" test -n "$(worker_pid)" -a -r "$work/mnt/lun1"
check_eq "... and reads" "$(dd if="$work/mnt/lun1" bs=4k count=1 iflag=direct status=none | wc -c)" 4096
(
	rc=0
	timeout 30 fio --name=ring --filename="$work/mnt/lun1" --size=32M --rw=randrw --bs=64k --iodepth=16 \
		--ioengine=libaio --direct=1 --time_based --runtime=10 --allow_file_create=0 \
		--output="$work/fio.out" >/dev/null 2>&1 || rc=$?
	echo "$rc" >"$work/fio.rc"
) &
bg=$!
sleep 1
pid=$(worker_pid)
check "a worker runs under the supervisor" test -n "$pid"
kill -KILL "$pid" 2>/dev/null || true
rc=0
if wait_exit "$daemon" 100; then
	wait "$daemon" || rc=$?
	daemon=''
	check_eq "the supervisor ends the mount: exit 1" "$rc" 1
else
	fail "the supervisor ends the mount within 10 s"
fi
check_eq "one line says why" "$(grep -c 'io_uring rings cannot be taken over' "$work/daemon.log" || true)" 1
check "the mount is gone" bash -c "! grep -qF ' $work/mnt ' /proc/mounts"
wait "$bg" || true
bg=''
frc=$(cat "$work/fio.rc" 2>/dev/null || echo none)
check "fio's I/O fails, it does not hang (fio exit $frc)" test "$frc" != none -a "$frc" != 0 -a "$frc" != 124
summary
