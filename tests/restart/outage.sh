#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A worker that dies while the target is down:
#
#   outage.sh ISERFUSE
#
# tgtd killed, then the worker: the new workers cannot log in, which is
# no crash loop: the supervisor starts them again (0.5 s doubling) and
# the requests wait, as for a session being recovered.  tgtd back within
# replacement_timeout: a new worker serves, the read that waited returns
# the data, the mount stays.  --restart while the target is down is
# refused, the worker serving on.  Then tgtd down for longer than
# replacement_timeout (-o replacement_timeout=15 here): one line, the mount
# is removed, the supervisor exits 1.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 pgrep

restart_mounted restart-outage -o replacement_timeout=15
pass "mounted"
head -c 4096 /dev/urandom >"$work/block"
dd if="$work/block" of="$work/mnt/lun1" bs=4k seek=77 oflag=direct conv=notrunc status=none
tgtd_kill "$work/tgtd"
sleep 0.5
restart_rc=0
"$iserfuse" --restart "$work/mnt" 2>"$work/restart.err" || restart_rc=$?
check_eq "--restart while the target is down: refused (exit 1)" "$restart_rc" 1
check "... with one line saying why" grep -q 'no path to the target is up' "$work/restart.err"
check "... the worker serves on" test -n "$(worker_pid)"
pid=$(worker_pid)
kill -KILL "$pid" 2>/dev/null || true
(
	rc=0
	dd if="$work/mnt/lun1" of="$work/read" bs=4k count=1 skip=77 iflag=direct status=none 2>"$work/dd.err" || rc=$?
	echo "$rc" >"$work/dd.rc"
) &
bg=$!
sleep 3
check "3 s later the mount is still there" grep -qF " $work/mnt " /proc/mounts
check "... and the supervisor runs" kill -0 "$daemon"
tgtd_restart "$work/tgtd" >/dev/null
wait_exit "$bg" 200 || true
bg=''
check_eq "the read that waited for a worker succeeded" "$(cat "$work/dd.rc" 2>/dev/null || echo none)" 0
check "... with the data written before" cmp -s "$work/block" "$work/read"
check_eq "worker_restarts counts them" "$(awk '$1 == "worker_restarts" { print ($2 > 0) }' "$work/mnt/.stats")" 1

# down for longer than replacement_timeout: the mount ends
tgtd_kill "$work/tgtd"
t0=$(date +%s)
kill -KILL "$(worker_pid)" 2>/dev/null || true
rc=0
wait_exit "$daemon" 300 || rc=timeout
if [[ $rc == timeout ]]; then
	fail "the supervisor exits within 30 s (replacement_timeout 15 s)"
else
	wait "$daemon" || rc=$?
	daemon=''
	check_eq "the supervisor gave up: exit 1" "$rc" 1
	echo "# gave up after $(($(date +%s) - t0)) s"
fi
check_eq "one line says why" "$(grep -c 'no worker could log in' "$work/daemon.log" || true)" 1
check "the mount is gone" bash -c "! grep -qF ' $work/mnt ' /proc/mounts"
summary
