#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "fuse-loop-backpressure" test of the e2e suite: requests that do not
# wait are still answered while every FUSE reader waits for back-pressure.
#
#   backpressure.sh ISERFUSE_BINARY
#
# Starts tgtd (LUN 1, 1 GiB, sparse), mounts it with queue_depth=1, pool_slices=2
# and cache_size=0, and runs fio with 64 direct writes in flight (4 KiB to
# 1 MiB, 640 MiB, crc32c verify).  While they run, tgtd is stopped (SIGSTOP) for 3 s:
# the writes then wait for a task slot or a pool slice in their handlers.
# Meanwhile `ls MNT` and `cat MNT/.stats` must each answer within 2 s (the
# loop starts stand-in readers).  After SIGCONT fio must finish with no
# error and its verify must pass, and the daemon must stop on SIGTERM.
# Over FUSE over io_uring, the stand-in ring threads must then park.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root.  Needs root,
# /dev/fuse, tgt, fuse3, fio.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the test mounts FUSE and runs tgtd, which needs root"

[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
need_tools tgtd tgtadm fusermount3 fio mountpoint pgrep timeout ss taskset dd

suite_scratch backpressure
mnt=$work/mnt
mkdir -p "$mnt"
tgtd_pid=''
fio_pid=''

suite_drop=('tgtd/*.img')
suite_teardown() {
	[[ -n $tgtd_pid ]] && kill -CONT "$tgtd_pid" 2>/dev/null
	[[ -n $fio_pid ]] && kill -KILL "$fio_pid" 2>/dev/null && wait "$fio_pid" 2>/dev/null
	force_unmount "$mnt"
	kill_daemons "$mnt" 5
	tgtd_stop "$work/tgtd"
	is_mounted "$mnt" && suite_busy="$mnt is still mounted"
	return 0
}

# ms CMD...: run CMD (10 s at most), print how long it took in milliseconds; its output goes to $work/timed.out.
ms() {
	local t0 t1
	t0=$(date +%s%N)
	timeout -k 2 10 "$@" >"$work/timed.out" 2>&1 || true
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

if ! tgtd_start "$work/tgtd" 1G 0 >/dev/null 2>"$work/log"; then
	fail "tgtd started"
	note "$work/log"
	summary
	exit 1
fi
pass "tgtd started ($TGT_URL)"
tgtd_pid=$(<"$work/tgtd/pid")

rc=0
timeout -k 10 120 "$iserfuse" -o initiator_name=iqn.2026-11.org.example:backpressure \
	-o queue_depth=1,pool_slices=2,cache_size=0 "$TGT_URL/1" "$mnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null || rc=$?
check_eq "mount with queue_depth=1,pool_slices=2,cache_size=0 exits 0" "$rc" 0
if ! is_mounted "$mnt" || ! wait_lun "$mnt" 50; then
	fail "$mnt/lun1 is there"
	note "$work/mount.err"
	summary
	exit 1
fi

# 64 direct writes in flight, 4 KiB .. 1 MiB, each block verified after the write phase.
fio --name=bp --filename="$mnt/lun1" --rw=randwrite --bsrange=4k-1m --iodepth=64 --ioengine=libaio \
	--direct=1 --size=640M --verify=crc32c --do_verify=1 --randrepeat=1 --output="$work/fio.out" \
	>"$work/fio.err" 2>&1 &
fio_pid=$!

# Until the writes flow: commands counted in .stats.
commands() {
	awk '$1 == "commands" { print $2 }' "$mnt/.stats" 2>/dev/null || echo 0
}
for _ in $(seq 100); do
	(($(commands) > 20)) && break
	sleep 0.1
done
check "the writes are flowing before tgtd stops (commands $(commands))" test "$(commands)" -gt 20

kill -STOP "$tgtd_pid"
t_stop=$(date +%s%N)
sleep 0.5 # the writes in flight pile up in their handlers
ls_ms=$(ms ls "$mnt")
ls_out=$(tr '\n' ' ' <"$work/timed.out")
stats_ms=$(ms cat "$mnt/.stats")
stats_ok=$(grep -c '^queue_depth_max ' "$work/timed.out" || true)
left=$((3000 - ($(date +%s%N) - t_stop) / 1000000))
((left > 0)) && sleep "$(awk -v l="$left" 'BEGIN { print l / 1000 }')"
kill -CONT "$tgtd_pid"

echo "# while tgtd was stopped: ls took $ls_ms ms ($ls_out), cat .stats took $stats_ms ms"
check "ls of the mount answers within 2 s while tgtd is stopped (took $ls_ms ms)" test "$ls_ms" -lt 2000
check "ls lists lun1" grep -qw lun1 <<<"$ls_out"
check "cat .stats answers within 2 s while tgtd is stopped (took $stats_ms ms)" test "$stats_ms" -lt 2000
check_eq ".stats has its counters" "$stats_ok" 1

rc=0
timeout 300 tail --pid="$fio_pid" -f /dev/null || true
wait "$fio_pid" || rc=$?
fio_pid=''
check_eq "fio exits 0 (writes and crc32c verify)" "$rc" 0
check "fio reports no I/O error" grep -q 'err= 0' "$work/fio.out"
check "fio verified what it wrote" grep -q 'READ:' "$work/fio.out"
if ((rc)); then
	note "$work/fio.out"
	note "$work/fio.err"
fi

# Over FUSE over io_uring a ring thread may not end before its ring: the
# stand-ins started for the stall step aside (park) once it is over, so
# that a ring is served by one thread again.  Reads from every CPU reach
# every queue's ring.
if [[ $(stat_of fuse_path) == io_uring ]]; then
	threads=$(stat_of fuse_ring_threads)
	check "the stall started a stand-in ring thread (fuse_ring_threads $threads)" test "${threads:-0}" -gt 1
	for cpu in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$cpu" dd if="$mnt/lun1" of=/dev/null bs=4k count=50 iflag=direct 2>/dev/null
	done
	parked=$(stat_of fuse_ring_threads_parked)
	check "a stand-in ring thread parked once the stall was over (fuse_ring_threads_parked ${parked:-none} of ${threads:-none})" \
		test "${parked:-0}" -ge 1
fi

pid=$(daemon_pids "$mnt")
rc=0
if [[ -n $pid ]]; then
	kill -TERM "$pid"
	wait_exit "$pid" 300 || rc=1
fi
check_eq "the daemon ends on SIGTERM" "$rc" 0
check "nothing is left mounted" test ! -e "$mnt/lun1"

summary
