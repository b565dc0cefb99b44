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
#    within noop_interval + noop_timeout; after SIGCONT the session is
#    reinstated and a read issued meanwhile completes with the right data.
# 3. Silent for longer than -o replacement_timeout: the pending read fails
#    with EIO, the daemon stays alive, and once tgtd runs again I/O works.
# Prints "ok - " / "not ok - " lines and "N passed, M failed".
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE "$@"
iserfuse=$1
need_exe "$iserfuse"
need_root "runs tgtd and mounts FUSE, which needs root"

suite_scratch keepalive
mnt=$work/mnt
mkdir -p "$mnt"
daemon=''
suite_drop=('tgtd/*.img' pattern got)
suite_teardown() {
	local pid
	pid=$(cat "$work/tgtd/pid" 2>/dev/null || true)
	[[ -n $pid ]] && kill -CONT "$pid" 2>/dev/null
	force_unmount "$mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	tgtd_stop "$work/tgtd"
}

tgtd_start "$work/tgtd" 16M 0 >/dev/null
tgt_pid=$(<"$work/tgtd/pid")

"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:keepalive -o noop_interval=1,noop_timeout=2 \
	-o replacement_timeout=8,login_timeout=4 "$TGT_URL/1" "$mnt" 2>"$work/daemon.log" &
daemon=$!
wait_lun "$mnt" 50 || true
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

dd if=/dev/urandom of="$work/pattern" bs=4096 count=2 status=none
check "write a pattern" dd if="$work/pattern" of="$mnt/lun1" bs=4096 count=2 oflag=direct conv=notrunc status=none

kill -STOP "$tgt_pid"
sleep 5 # > noop_interval + noop_timeout
check "a silent target is declared dead" grep -q "no answer to a NOP-Out ping" "$work/daemon.log"
rc=0
timeout 30 dd if="$mnt/lun1" of="$work/got" bs=4096 count=2 iflag=direct status=none 2>"$work/dd.log" &
dd_pid=$!
sleep 1
kill -CONT "$tgt_pid"
wait "$dd_pid" || rc=$?
check_eq "a read issued while the target is silent completes after SIGCONT" "$rc" 0
check "... with the data written before" cmp -s "$work/got" "$work/pattern"
check "the session was reinstated" grep -q "reinstated after command or NOP-Out timeout" "$work/daemon.log"

# Longer than replacement_timeout (8 s): the pending read fails with EIO.
kill -STOP "$tgt_pid"
sleep 4
rc=0
timeout 30 dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>"$work/dd.log" || rc=$?
if ((rc != 0 && rc != 124)) && grep -q "Input/output error" "$work/dd.log"; then
	pass "I/O pending past replacement_timeout fails with EIO"
else
	fail "I/O pending past replacement_timeout fails with EIO (dd exit $rc)"
	note "$work/dd.log"
fi
check "the replacement timeout is logged" grep -q "replacement timeout" "$work/daemon.log"
kill -CONT "$tgt_pid"
ok=0
for _ in $(seq 30); do
	if timeout 10 dd if="$mnt/lun1" of="$work/got" bs=4096 count=2 iflag=direct status=none 2>/dev/null; then
		ok=1
		break
	fi
	sleep 1
done
check_eq "I/O works again once the target answers" "$ok" 1
check "... with the data written before" cmp -s "$work/got" "$work/pattern"
check "the daemon is still running" kill -0 "$daemon"
check "fusermount3 -u" fusermount3 -u "$mnt"
wait_exit "$daemon" 100 || true
if kill -0 "$daemon" 2>/dev/null; then
	fail "the daemon exits after the unmount"
else
	pass "the daemon exits after the unmount"
	daemon=''
fi
summary
