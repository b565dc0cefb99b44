#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A crash loop ends the mount cleanly:
#
#   loop.sh ISERFUSE
#
# The binary on disk breaks (a bad upgrade: it exits 1 at once) and the
# worker is killed: every new worker dies at its start.  After 5 deaths
# within 60 s the supervisor says why in one line, removes the mount and
# exits 1, within 70 s; a read of the LUN file that was waiting fails
# instead of hanging.  (A target that is down is no crash loop: outage.sh.)
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 pgrep

# A copy of the binary, so that the one on disk can break (a bad upgrade)
bin=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-restart-loop-bin.XXXXXX")
cp "$1" "$bin/iserfuse"
iserfuse=$bin/iserfuse
restart_mounted restart-loop
pass "mounted"
pid=$(worker_pid)
check "a worker runs under the supervisor" test -n "$pid"
# the binary on disk now fails at once; a crash makes the supervisor start it
printf '#!/bin/sh\necho "broken build" >&2\nexit 1\n' >"$bin/iserfuse.new"
chmod 755 "$bin/iserfuse.new"
mv "$bin/iserfuse.new" "$bin/iserfuse"
t0=$(date +%s)
kill -KILL "$pid" 2>/dev/null || true
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
rm -rf "$bin"
summary
