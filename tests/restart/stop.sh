#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A stop during a restart:
#
#   stop.sh ISERFUSE
#
# The target stops answering (tgtd SIGSTOP: the new worker's login waits)
# and the worker is killed; SIGTERM to the supervisor then ends both
# within seconds and removes the mount.  Then, with the target back, a
# plain SIGTERM stops the worker as before (exit 0, the mount removed).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 pgrep

restart_mounted restart-stop
pass "mounted"
pid=$(worker_pid)
if [[ -z $pid ]]; then
	fail "a worker runs under the supervisor"
	summary
	exit 1
fi
tpid=$(cat "$work/tgtd/pid")
kill -STOP "$tpid"
kill -KILL "$pid"
for _ in $(seq 100); do
	new=$(worker_pid)
	[[ -n $new && $new != "$pid" ]] && break
	sleep 0.05
done
check "a new worker started (its login waits)" test -n "$new" -a "$new" != "$pid"
sleep 0.5
t0=$(date +%s%3N)
kill -TERM "$daemon"
if wait_exit "$daemon" 100; then
	wait "$daemon" || true
	pass "SIGTERM during the restart: the supervisor exits within 10 s ($(($(date +%s%3N) - t0)) ms)"
	daemon=''
else
	fail "SIGTERM during the restart: the supervisor exits within 10 s"
fi
check "no worker left" bash -c "! kill -0 $new 2>/dev/null"
check "the mount is gone" bash -c "! grep -qF ' $work/mnt ' /proc/mounts"
kill -CONT "$tpid"

# A plain stop, as before.
"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:restart "$TGT_URL/1" "$work/mnt" 2>>"$work/daemon.log" &
daemon=$!
wait_lun "$work/mnt" 200 "$daemon" || fail "mounted again"
echo data >"$work/mnt/lun1"
kill -TERM "$daemon"
rc=0
wait_exit "$daemon" 200 && { wait "$daemon" || rc=$?; } || rc=timeout
check_eq "SIGTERM: the supervisor and its worker stop, exit 0" "$rc" 0
daemon=''
check "the mount is gone" bash -c "! grep -qF ' $work/mnt ' /proc/mounts"
summary
