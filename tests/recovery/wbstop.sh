#!/bin/bash
# SPDX-License-Identifier: MIT
#
# SIGTERM during an outage with write-back data not yet written:
#
#   wbstop.sh ISERFUSE
#
# Mounted with -o writeback and replacement_timeout=60: a process keeps
# lun1 open and writes 64 whole 64 KiB cache blocks (4 MiB, acknowledged,
# held in the cache: no fsync, no close), tgtd is killed, and the daemon
# gets SIGTERM.  Within the stop grace (5 s) plus a few seconds it exits 1,
# and its log tells the loss once: one line with the LUN, the bytes of
# acknowledged write-back data discarded (4194304) and the stop grace as
# the reason; no per-command "I/O failed" line at the default level, no
# status or sense the target never sent, no "replacement timeout" line
# (the replacement timeout did not pass).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "needs root (tgtd, FUSE)"

blocks=64
bytes=$((blocks * 65536))
tgtd_mounted wbstop -o writeback -o replacement_timeout=60
pass "mounted"

# The writer: whole cache blocks from 1 MiB on, then it waits with the file open.
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
buf = os.urandom(65536)
for i in range(int(sys.argv[2])):
    os.pwrite(fd, buf, (16 + i) * 65536)
open(sys.argv[3], "w").close()
time.sleep(120)
' "$work/mnt/lun1" "$blocks" "$work/written" 2>"$work/writer.err" &
worker=$!
for ((i = 0; i < 100; i++)); do
	[[ -e $work/written ]] && break
	sleep 0.1
done
check "$bytes bytes written and acknowledged (write-back)" test -e "$work/written"

tgtd_kill "$work/tgtd"
sleep 1
sigterm_within_grace
if [[ -n $drc ]]; then check_eq "exit status 1 (the data did not reach the target)" "$drc" 1; fi
kill "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=''

lost=$(grep -c 'acknowledged write-back data' "$work/daemon.log" || true)
check_eq "one line tells the discarded write-back data" "$lost" 1
check "it names the LUN, the bytes and the stop grace" \
	grep -qE "lun1: $bytes bytes of acknowledged write-back data discarded: .*stop grace" "$work/daemon.log"
check_eq "no per-command \"I/O failed\" line" "$(grep -c 'I/O failed' "$work/daemon.log" || true)" 0
check_eq "no status or sense the target did not send" "$(grep -c '(status 0x' "$work/daemon.log" || true)" 0
check_eq "no \"replacement timeout\" line (the stop grace, not the timeout)" \
	"$(grep -c 'replacement timeout' "$work/daemon.log" || true)" 0
force_unmount "$work/mnt"
sed 's/^/# daemon: /' "$work/daemon.log"
summary
