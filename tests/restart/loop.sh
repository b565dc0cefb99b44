#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A crash loop ends the mount cleanly:
#
#   loop.sh ISERFUSE
#
# The target goes away (tgtd killed) and the worker is killed: every new
# worker fails its login at once.  After 5 deaths within 60 s the
# supervisor says why in one line, removes the mount and exits 1, within
# 70 s; a read of the LUN file that was waiting fails instead of hanging.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

if [[ $# -ne 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE" >&2
	exit 2
fi
iserfuse=$1
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 pgrep

restart_mounted restart-loop
pass "mounted"
pid=$(worker_pid)
check "a worker runs under the supervisor" test -n "$pid"
tgtd_kill "$work/tgtd"
t0=$(date +%s)
kill -KILL "$pid" 2>/dev/null || true
# a reader that waits for a worker: it must end with an error once the supervisor gives up
(
	rc=0
	dd if="$work/mnt/lun1" of=/dev/null bs=4k count=1 skip=77 iflag=direct status=none 2>"$work/dd.err" || rc=$?
	echo "$rc" >"$work/dd.rc"
) &
bg=$!
rc=0
wait_exit "$daemon" 700 || rc=timeout
if [[ $rc == timeout ]]; then
	fail "the supervisor exits within 70 s"
else
	wait "$daemon" || rc=$?
	daemon=''
	check_eq "the supervisor gave up: exit 1" "$rc" 1
	echo "# gave up after $(($(date +%s) - t0)) s"
fi
check_eq "one line says why" "$(grep -c 'giving up' "$work/daemon.log" || true)" 1
grep 'giving up' "$work/daemon.log" | sed 's/^/# /'
check "the mount is gone" bash -c "! grep -qF ' $work/mnt ' /proc/mounts"
wait_exit "$bg" 100 || true
check "a read that waited for a worker ended with an error" test "$(cat "$work/dd.rc" 2>/dev/null || echo none)" != none -a "$(cat "$work/dd.rc" 2>/dev/null)" != 0
bg=''
summary
