#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Keep-alive against a real tgtd:
#
#   keepalive.sh ISERFUSE
#
# 1. With -o noop_interval=1: an idle mount stays usable for several
#    intervals (our NOP-Out pings are answered, tgtd's NOP-Ins too).
# 2. A target that goes silent (tgtd stopped with SIGSTOP) is declared dead
#    within noop_interval + noop_timeout: the daemon logs it, stays alive,
#    and I/O then fails with EIO instead of hanging.
# Prints "ok - " / "not ok - " lines and "N passed, M failed".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"

if [[ $# -ne 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE" >&2
	exit 2
fi
iserfuse=$1
if [[ $(id -u) -ne 0 ]]; then
	echo "# SKIP: runs tgtd and mounts FUSE, which needs root"
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-keepalive.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
daemon=''
cleanup() {
	local pid
	pid=$(cat "$work/tgtd/pid" 2>/dev/null || true)
	[[ -n $pid ]] && kill -CONT "$pid" 2>/dev/null || true
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null || true
	tgtd_stop "$work/tgtd"
	rm -rf "$work"
}
trap cleanup EXIT

tgtd_start "$work/tgtd" 16M 0 >/dev/null
tgt_pid=$(<"$work/tgtd/pid")

"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:keepalive -o noop_interval=1,noop_timeout=2 \
	"$TGT_URL/1" "$mnt" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 50); do
	[[ -e $mnt/lun1 ]] && break
	sleep 0.1
done
check "mounted" test -e "$mnt/lun1"

sleep 4 # several ping intervals with nothing else to do
check "an idle session survives 4 ping intervals" \
	timeout 10 dd if="$mnt/lun1" of=/dev/null bs=4096 count=4 iflag=direct status=none
if grep -q "NOP-Out ping" "$work/daemon.log"; then
	fail "no keep-alive failure while tgtd answers"
	note "$work/daemon.log"
else
	pass "no keep-alive failure while tgtd answers"
fi

kill -STOP "$tgt_pid"
sleep 5 # > noop_interval + noop_timeout
check "a silent target is declared dead" grep -q "no answer to a NOP-Out ping" "$work/daemon.log"
rc=0
timeout 10 dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>"$work/dd.log" || rc=$?
kill -CONT "$tgt_pid"
if ((rc != 0 && rc != 124)) && grep -q "Input/output error" "$work/dd.log"; then
	pass "I/O after the drop fails with EIO, without hanging"
else
	fail "I/O after the drop fails with EIO, without hanging (dd exit $rc)"
	note "$work/dd.log"
fi
check "the daemon is still running" kill -0 "$daemon"
check "fusermount3 -u" fusermount3 -u "$mnt"
for _ in $(seq 100); do
	kill -0 "$daemon" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$daemon" 2>/dev/null; then
	fail "the daemon exits after the unmount"
else
	pass "the daemon exits after the unmount"
	daemon=''
fi
summary
