#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "event-loop" test of the e2e suite: each iSCSI/TCP connection's
# event thread waits on an io_uring (-o event_loop=uring, the default) or
# in poll(2) (event_loop=poll); both move the same bytes, and the ring
# saves the system calls it exists for.
#
#   eventloop.sh ISERFUSE_BINARY
#
# Starts tgtd (LUN 1, 64 MiB), then for each of uring (default options),
# uring with CRC32C header and data digests, and poll:
#   - mounts it over TCP (iserfuse -f in the background,
#     rescan_interval=0); .stats says which loop the connection runs
#     (tcp_loops_uring / tcp_loops_poll: 1 and 0, or 0 and 1);
#   - fio, O_DIRECT, 4 jobs at queue depth 16, random reads and writes of
#     4 KiB to 1 MiB (so batches the socket cannot take at once, Data-In
#     placed straight into the slice and Data-In copied from the receive
#     buffer) with verify=crc32c: exit 0, no verify error;
#   - 2000 4 KiB O_DIRECT reads, one at a time, under strace -c -f: the
#     daemon's system calls per read.  On the ring at most 3.5 (one
#     io_uring_enter submits the last reply and waits for the request,
#     read(2) takes it, one io_uring_enter sends the command and receives
#     the response: 3); in poll(2) at least 5.5 (poll, read, sendmsg,
#     poll, read, writev: 6);
#     (skipped where the FUSE rings serve the mount: those counts are for
#     /dev/fuse);
#   - SIGTERM: exit 0, nothing mounted.
# A bad value (event_loop=epoll) fails before mounting: one line naming
# it, exit 1.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root.  Needs root,
# /dev/fuse, tgt, fuse3, fio, strace.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the test mounts FUSE and runs tgtd, which needs root"

[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
need_tools tgtd tgtadm fusermount3 mountpoint dd timeout fio strace

suite_scratch eventloop
mnt=$work/mnt
mkdir -p "$mnt"

suite_drop=('tgtd/*.img' 'fio.*')
daemon=''
suite_teardown() {
	force_unmount "$mnt"
	[[ -n $daemon ]] && _targets_kill "$daemon" 5
	kill_daemons "$mnt" 5
	tgtd_stop "$work/tgtd"
	is_mounted "$mnt" && suite_busy="$mnt is still mounted"
	return 0
}

if ! tgtd_start "$work/tgtd" 64M 0 >/dev/null 2>"$work/log"; then
	fail "tgtd started"
	note "$work/log"
	summary
	exit 1
fi
pass "tgtd started ($TGT_URL)"
ctl=$(<"$work/tgtd/ctl")

# syscalls_per_read N: the worker's system calls over N one-at-a-time 4 KiB O_DIRECT reads, per read
syscalls_per_read() {
	local n=$1 pid st
	pid=$(worker_pid)
	strace -f -qq -c -p "$pid" -o "$work/strace.out" &
	st=$!
	sleep 1 # strace has attached to every thread
	dd if="$mnt/lun1" of=/dev/null bs=4k count="$n" iflag=direct status=none
	kill -INT "$st"
	wait "$st" || true
	awk -v n="$n" '$NF == "total" { printf "%.2f\n", $(NF - 2) / n }' "$work/strace.out"
}

# one LOOP WHAT OPTS...: mount with OPTS, check the loop .stats names, verify, count, stop
one() {
	local loop=$1 what=$2 other=poll per
	shift 2
	[[ $loop == poll ]] && other=uring
	"$iserfuse" -f -o initiator_name=iqn.2026-12.org.example:eventloop -o rescan_interval=0 "$@" \
		"$TGT_URL/1" "$mnt" >"$work/daemon.$what.log" 2>&1 </dev/null &
	daemon=$!
	if ! wait_lun "$mnt" 300 "$daemon"; then
		fail "$what: mount"
		note "$work/daemon.$what.log"
		return
	fi
	check_eq "$what: .stats tcp_loops_$loop 1, tcp_loops_$other 0" \
		"$(stat_of "tcp_loops_$loop") $(stat_of "tcp_loops_$other")" "1 0"
	if timeout 240 fio --name=v --filename="$mnt/lun1" --direct=1 --ioengine=libaio --rw=randrw \
		--bsrange=4k-1m --iodepth=16 --numjobs=4 --size=12m --offset_increment=16m --verify=crc32c \
		--verify_fatal=1 --group_reporting >"$work/fio.$what" 2>&1; then
		pass "$what: fio randrw 4 KiB-1 MiB, 4 jobs at depth 16, verify=crc32c"
	else
		fail "$what: fio randrw 4 KiB-1 MiB, 4 jobs at depth 16, verify=crc32c"
		tail -n 15 "$work/fio.$what" | sed 's/^/#   /'
	fi
	if [[ $(stat_of fuse_path) == io_uring ]]; then
		skip "$what: system calls per read" "the FUSE rings serve the mount: the counts are for /dev/fuse"
		sigterm_check "$what: SIGTERM"
		return
	fi
	per=$(syscalls_per_read 2000)
	echo "# $what: $per system calls per 4 KiB O_DIRECT read at queue depth 1"
	if [[ $loop == uring ]]; then
		check "$what: at most 3.5 system calls per read at queue depth 1 ($per)" \
			awk -v p="$per" 'BEGIN { exit !(p != "" && p <= 3.5) }'
	else
		check "$what: at least 5.5 system calls per read at queue depth 1 ($per)" \
			awk -v p="$per" 'BEGIN { exit !(p != "" && p >= 5.5) }'
	fi
	sigterm_check "$what: SIGTERM"
}

one uring "uring (default)"
if _tgtadm "$ctl" --op update --mode target --tid 1 --name HeaderDigest --value CRC32C,None &&
	_tgtadm "$ctl" --op update --mode target --tid 1 --name DataDigest --value CRC32C,None; then
	one uring "uring, digests" -o header_digest=crc32c -o data_digest=crc32c
else
	fail "tgtadm offers CRC32C digests"
fi
one poll "poll" -o event_loop=poll

rc=0
out=$("$iserfuse" -f -o event_loop=epoll "$TGT_URL/1" "$mnt" 2>&1 </dev/null) || rc=$?
check_eq "event_loop=epoll: exit 1, one line naming it" \
	"$rc $(wc -l <<<"$out") $(grep -c "event_loop=epoll" <<<"$out")" "1 1 1"
check "event_loop=epoll: nothing mounted" bash -c "! grep -qF ' $mnt ' /proc/mounts"
summary
