#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "io-thread" test of the e2e suite: with -o io_threads=1 (the
# default) the connection's event thread reads /dev/fuse itself and runs
# O_DIRECT READ and WRITE to completion on its own thread; everything
# else goes to the FUSE readers, and the data is what was written.
#
#   iothread.sh ISERFUSE_BINARY
#
# Starts tgtd (LUN 1, 64 MiB), mounts it over TCP (iserfuse -f in the
# background, rescan_interval=0, block cache at its default size), then:
#   - 16 MiB of random data in 4 KiB O_DIRECT writes, read back in 4 KiB
#     O_DIRECT reads and in buffered 1 MiB reads: the same sha256 each
#     time; .stats io_thread_requests grew by exactly the 8192 O_DIRECT
#     requests (the buffered reads go through the cache and a reader:
#     io_thread_handed_off grew);
#   - 2000 4 KiB O_DIRECT reads, one at a time: one thread of the daemon
#     (the event thread) slept about once per read (at least 1000 times)
#     (voluntary_ctxt_switches of /proc/PID/task/*/status); no other
#     thread slept more than 200 times (before, a FUSE reader slept once
#     per read beside the event thread);
#   - ls and .stats answer (handed off) meanwhile;
#   - 8 worker restarts (--restart) under O_DIRECT fio random read/write
#     with verify and a stat/.stats loop: fio exits 0, no request is
#     answered ENOMEM (an old worker's event thread once read on after its
#     loop ended and answered what it could not hand over so);
#   - a file opened O_DIRECT before a --restart: its reads and writes
#     after it run on the event thread (io_thread_requests);
# the daemon ends on SIGTERM with exit status 0; then remounts with
# -o io_threads=0: the same O_DIRECT reads leave io_thread_requests at 0,
# and two threads sleep once per read.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root.  Needs root,
# /dev/fuse, tgt, fuse3, dd, sha256sum.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the test mounts FUSE and runs tgtd, which needs root"

[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
need_tools tgtd tgtadm fusermount3 mountpoint dd sha256sum head timeout fio

suite_scratch iothread
mnt=$work/mnt
mkdir -p "$mnt"

suite_drop=('tgtd/*.img' 'data' 'back')
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

# it_mount LOG OPTS...: iserfuse -f in the background ($daemon, stderr to LOG); 1 unless lun1 appears
it_mount() {
	local log=$1
	shift
	"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:iothread -o rescan_interval=0 "$@" \
		"$TGT_URL/1" "$mnt" >"$log" 2>&1 </dev/null &
	daemon=$!
	wait_lun "$mnt" 300 "$daemon"
}

# switches PID: "TID voluntary_ctxt_switches" per thread
switches() {
	local t
	for t in /proc/"$1"/task/*; do
		echo "${t##*/} $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)"
	done
}

# sleepers PID N: after N one-at-a-time 4 KiB O_DIRECT reads, "A B": the threads that slept at least
# N/2 times (once a read, but for the reads whose request was there before the thread looked: a
# loaded machine), and the most any other thread slept
sleepers() {
	local pid=$1 n=$2 before after
	before=$(switches "$pid")
	dd if="$mnt/lun1" of=/dev/null bs=4k count="$n" iflag=direct status=none
	after=$(switches "$pid")
	join <(sort <<<"$before") <(sort <<<"$after") |
		awk -v n="$n" '{ d = $3 - $2; if (2 * d >= n) a++; else if (d > m) m = d } END { print a + 0, m + 0 }'
}

if ! it_mount "$work/daemon.log"; then
	fail "mount: $mnt/lun1 is there"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mount: $mnt/lun1 is there"
if [[ $(stat_of fuse_path) == io_uring ]]; then
	skip "the I/O thread's checks" "the FUSE rings serve the mount: /dev/fuse carries no I/O"
	sigterm_check "SIGTERM"
	summary
	exit 0
fi

head -c $((16 << 20)) /dev/urandom >"$work/data"
sum=$(sha256sum <"$work/data" | cut -d' ' -f1)
r0=$(stat_of io_thread_requests)
h0=$(stat_of io_thread_handed_off)
dd_check "16 MiB written in 4 KiB O_DIRECT writes" "$work/daemon.log" \
	if="$work/data" of="$mnt/lun1" bs=4k count=4096 oflag=direct conv=notrunc || true
dd_check "16 MiB read back in 4 KiB O_DIRECT reads" "$work/daemon.log" \
	if="$mnt/lun1" of="$work/back" bs=4k count=4096 iflag=direct || true
check_eq "the O_DIRECT reads have the sha256 written" "$(sha256sum <"$work/back" | cut -d' ' -f1)" "$sum"
r1=$(stat_of io_thread_requests)
check_eq "io_thread_requests grew by the 8192 O_DIRECT requests" "$((r1 - r0))" 8192
dd_check "16 MiB read back buffered, 1 MiB reads" "$work/daemon.log" \
	if="$mnt/lun1" of="$work/back" bs=1M count=16 || true
check_eq "the buffered reads have the sha256 written" "$(sha256sum <"$work/back" | cut -d' ' -f1)" "$sum"
h1=$(stat_of io_thread_handed_off)
check "the buffered reads went to the readers (io_thread_handed_off $h0 -> $h1)" test "$h1" -gt "$h0"

pid=$(worker_pid)
read -r a m < <(sleepers "$pid" 2000)
echo "# io_threads=1: $a thread(s) slept per read, the most any other slept: $m"
check_eq "io_threads=1: one thread sleeps per O_DIRECT read (the event thread)" "$a" 1
check "io_threads=1: no other thread slept more than 200 times in 2000 reads ($m)" test "$m" -le 200
dd if="$mnt/lun1" of=/dev/null bs=4k count=20000 iflag=direct status=none &
bg=$!
ok=0
for _ in 1 2 3 4 5; do
	timeout 5 ls "$mnt" >/dev/null && timeout 5 cat "$mnt/.stats" >/dev/null && ok=$((ok + 1))
done
wait "$bg"
check_eq "ls and .stats answer 5 times during O_DIRECT reads" "$ok" 5

# Worker restarts under O_DIRECT load: the old worker's event thread reads nothing once its loop
# ended, and what it read then stays for the next worker (resent): no request answered ENOMEM.
fio --name=restarts --filename="$mnt/lun1" --size=32M --bsrange=4k-1M --rw=randrw --ioengine=libaio \
	--direct=1 --iodepth=32 --verify=crc32c --verify_fatal=0 --continue_on_error=all --runtime=10 \
	--time_based --output="$work/fio.out" >/dev/null 2>"$work/fio.err" &
bg=$!
(while kill -0 "$bg" 2>/dev/null; do
	stat "$mnt/lun1" >/dev/null 2>>"$work/stat.err"
	cat "$mnt/.stats" >/dev/null 2>>"$work/stat.err"
done) &
loop=$!
fails=0
for _ in 1 2 3 4 5 6 7 8; do
	sleep 1
	timeout 30 "$iserfuse" --restart "$mnt" >>"$work/restart.out" 2>&1 || fails=$((fails + 1))
done
rc=0
wait "$bg" || rc=$?
wait "$loop" 2>/dev/null || true
check_eq "8 worker restarts under O_DIRECT fio with verify: each restart succeeds, fio exits 0" "$fails $rc" "0 0"
nomem=$(cat "$work/fio.out" "$work/fio.err" "$work/stat.err" 2>/dev/null | grep -c "Cannot allocate memory" || true)
check_eq "no request answered ENOMEM across the restarts" "$nomem" 0

# A file opened O_DIRECT before a restart: the new worker has no struct gw_file for it (another
# worker's handle), and its reads still run on the event thread, as its writes do.
held=$(python3 - "$mnt" "$iserfuse" <<'PY' 2>"$work/held.err"
import mmap, os, subprocess, sys
mnt, exe = sys.argv[1], sys.argv[2]
def stat(key):
    with open(mnt + "/.stats") as f:
        return int(next(l.split()[1] for l in f if l.split()[0] == key))
fd = os.open(mnt + "/lun1", os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 65536)
os.preadv(fd, [buf], 0)
subprocess.run([exe, "--restart", mnt], check=True, timeout=30, stdout=subprocess.DEVNULL)
r0 = stat("io_thread_requests")
for i in range(50):
    os.preadv(fd, [buf], i * 65536)
r1 = stat("io_thread_requests")
for i in range(50):
    os.pwritev(fd, [buf], i * 65536)
print(r1 - r0, stat("io_thread_requests") - r1)
PY
)
check_eq "a file opened O_DIRECT before a restart: its 50 reads and 50 writes run on the event thread" \
	"$held" "50 50"
sigterm_check "SIGTERM"

if ! it_mount "$work/daemon0.log" -o io_threads=0; then
	fail "mount with io_threads=0"
	note "$work/daemon0.log"
	summary
	exit 1
fi
pid=$(worker_pid)
read -r a m < <(sleepers "$pid" 2000)
echo "# io_threads=0: $a thread(s) slept per read"
check_eq "io_threads=0: io_thread_requests stays 0" "$(stat_of io_thread_requests)" 0
check_eq "io_threads=0: two threads sleep per O_DIRECT read (a FUSE reader, the event thread)" "$a" 2
sigterm_check "SIGTERM (io_threads=0)"
summary
