#!/bin/bash
# SPDX-License-Identifier: MIT
#
# An outage longer than -o replacement_timeout:
#
#   outage.sh ISERFUSE
#
# With replacement_timeout=3: tgtd is killed during a stream of writes and
# stays down 9 s.  The pending write fails with EIO (within the
# replacement timeout plus a few seconds), a new read during the outage
# fails at once with EIO, the daemon keeps running, and once tgtd is back
# with the same LUN the session is reinstated and I/O works again (data
# written before the outage reads back).  Last, an unmount while the
# target is down again ends the daemon (close during recovery).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "needs root (tgtd, FUSE)"

tgtd_mounted outage -o replacement_timeout=3
pass "mounted"
head -c 65536 /dev/urandom >"$work/pattern"
check "write a pattern" dd if="$work/pattern" of="$work/mnt/lun1" bs=65536 count=1 oflag=direct conv=notrunc status=none

# A stream of writes after the pattern, still going when tgtd dies.
(
	rc=0
	while ((rc == 0)); do
		dd if=/dev/zero of="$work/mnt/lun1" bs=65536 seek=1 count=1000 oflag=direct conv=notrunc \
			status=none 2>"$work/writer.err" || rc=$?
	done
	echo "$rc $(date +%s%3N)" >"$work/writer.rc"
) &
worker=$!
sleep 1
tgtd_kill "$work/tgtd"
killed=$SECONDS
killed_ms=$(date +%s%3N)
for ((i = 0; i < 150; i++)); do
	[[ -e $work/writer.rc ]] && break
	sleep 0.1
done
wait "$worker" 2>/dev/null || true
worker=''
if [[ -e $work/writer.rc ]]; then
	read -r wrc wend <"$work/writer.rc"
	# The kill is seen at once (the connection is reset): EIO comes after the
	# 3 s replacement timeout, give or take the writer's own turnaround.
	if ((wrc != 0)) && grep -q 'Input/output error' "$work/writer.err" && ((wend - killed_ms <= 3000 + 3000)); then
		pass "the pending write fails with EIO after $((wend - killed_ms)) ms (replacement_timeout 3 s, at most 6 s)"
	else
		fail "the pending write fails with EIO after at most 6 s (dd exit $wrc after $((wend - killed_ms)) ms; replacement_timeout 3 s)"
		note "$work/writer.err"
	fi
else
	fail "the pending write ends within 15 s of the kill"
fi
check "the replacement timeout is logged" grep -q 'replacement timeout' "$work/daemon.log"

rc=0
start=$(date +%s%N)
timeout 10 dd if="$work/mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>"$work/dd.err" || rc=$?
took=$((($(date +%s%N) - start) / 1000000))
if ((rc != 0 && rc != 124)) && grep -q 'Input/output error' "$work/dd.err" && ((took < 2000)); then
	pass "a new read during the outage fails at once with EIO (${took} ms)"
else
	fail "a new read during the outage fails at once with EIO (dd exit $rc after ${took} ms)"
	note "$work/dd.err"
fi
check "the daemon keeps running" kill -0 "$daemon"
ls_quiet() { timeout 10 ls "$@" >/dev/null; }
check "ls still answers" ls_quiet "$work/mnt/lun1"

sleep $((9 - (SECONDS - killed) > 0 ? 9 - (SECONDS - killed) : 0))
check "tgtd restarted with the same LUN" tgtd_restart "$work/tgtd"
check "the session is reinstated" wait_reinstated 1 30
ok=0
for ((i = 0; i < 20; i++)); do
	if timeout 10 dd if="$work/mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none 2>/dev/null; then
		ok=1
		break
	fi
	sleep 0.5
done
check_eq "I/O works again" "$ok" 1
check "the data written before the outage reads back" cmp -s "$work/got" "$work/pattern"
check "writes work again" dd if="$work/pattern" of="$work/mnt/lun1" bs=65536 seek=2 count=1 oflag=direct conv=notrunc status=none
echo "# downtime (ms): $(downtimes | tr '\n' ' ')"

# Unmount while the target is down again (iscsi_session_close during
# recovery): the daemon must exit, not wait for the target.
tgtd_kill "$work/tgtd"
sleep 1
start=$SECONDS
unmount_check
echo "# the daemon took $((SECONDS - start)) s to exit with the target down"
summary
