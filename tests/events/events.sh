#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Target events and stopping, against real peers:
#
#   events.sh ISERFUSE
#
# 1. Transient SCSI statuses on the data path (tests/malicious/fake_target.py
#    --event): BUSY, TASK SET FULL, NOT READY / becoming ready and a power-on
#    UNIT ATTENTION are retried and the read returns the right bytes; a LUN
#    that never becomes ready fails with EIO once cmd_timeout is spent; a
#    CAPACITY DATA HAS CHANGED UNIT ATTENTION (rescans off) grows the file,
#    its new area reads the target's bytes and its log line names lun1; a discard whose WRITEs of
#    zeroes meet BUSY 10 times backs off and succeeds.
# 2. tgtd: grow LUN 1 (tgtd 1.0.85 has no online resize: delete the LUN,
#    enlarge the backing file, add it again) -> the file's size follows;
#    data old and new is checked against the backing file both ways; add
#    LUN 2 -> lun2 appears, with its by-id/ links; remove it with the file
#    open -> the name and the links go,
#    reads on the open file fail with ENODEV; add it back; write-protect it
#    (readonly=1) -> the file turns read-only and writes fail with EROFS,
#    and back (readonly=0) -> writable again.  With rescans off,
#    the REPORTED LUNS DATA HAS CHANGED UNIT ATTENTION that tgtd raises on
#    LUN 1 when LUN 3 is added (deleted) makes lun3 appear (go).
# 3. Stopping: SIGTERM while a writer is busy -> exit 0, every byte the
#    writer was told was written is in the backing file, the session logged
#    out (tgtd shows no I_T nexus); fusermount3 -u -> exit 0; a second
#    SIGTERM while the drain is stuck (tgtd stopped with SIGSTOP) -> exit 2
#    at once; six SIGTERMs under fio QD32 -> exit 0 and no stderr line
#    without "iserfuse: " (libfuse's "fuse: writing device: Bad file
#    descriptor" for a reply after the channel closed).
# Prints "ok - " / "not ok - " lines and "N passed, M failed".
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "runs tgtd and mounts FUSE, which needs root"
if [[ ! -c /dev/fuse ]]; then
	fail "tools installed (missing: /dev/fuse)"
	summary
	exit 1
fi
target_py=$here/../malicious/fake_target.py
initiator=iqn.2026-11.org.example:events-test

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-events.XXXXXX")
sanitizer_logs "$work"
mnt=$work/mnt
mkdir -p "$mnt"
daemon=''
fake=''
cleanup() {
	local pid rc=$?
	set +e
	pid=$(cat "$work/tgtd/pid" 2>/dev/null)
	[[ -n $pid ]] && kill -CONT "$pid" 2>/dev/null
	if grep -qF " $mnt " /proc/mounts; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	fi
	[[ -n $daemon ]] && _targets_kill "$daemon" 5
	[[ -n $fake ]] && _targets_kill "$fake" 2
	tgtd_stop "$work/tgtd"
	sanitizer_check || rc=1
	if ((failed == 0 && rc == 0)); then rm -rf "$work"; else echo "# logs kept in $work"; fi
	exit "$rc"
}
trap cleanup EXIT

# mount URL LOG OPTS...: iserfuse -f in the background ($daemon), wait for a LUN file.
mount_gw() {
	local url=$1 log=$2
	shift 2
	"$iserfuse" -f -o "initiator_name=$initiator" "$@" "$url" "$mnt" 2>"$log" </dev/null &
	daemon=$!
	for _ in $(seq 100); do
		[[ -n $(ls "$mnt" 2>/dev/null) ]] && return 0
		kill -0 "$daemon" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# unmount_gw: fusermount3 -u; the daemon's exit status in $gw_status.
unmount_gw() {
	gw_status=0
	fusermount3 -u "$mnt" 2>/dev/null || true
	wait "$daemon" || gw_status=$?
	daemon=''
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s; prints the seconds it took.
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i <= secs * 10; i++)); do
		if "$@"; then
			printf '%d.%d\n' $((i / 10)) $((i % 10))
			return 0
		fi
		sleep 0.1
	done
	return 1
}

size_is() { [[ $(stat -c %s "$1" 2>/dev/null) == "$2" ]]; }
# The LUN files in the mount's root (by-id/ and .stats are not LUNs).
lun_files() { ls "$mnt" 2>/dev/null | grep '^lun' | tr '\n' ' '; }
listing_is() { [[ $(lun_files) == "$1" ]]; }
# The by-id/ links that point at LUN file $1.
byid_of() { local f; for f in "$mnt"/by-id/*; do [[ $(readlink "$f" 2>/dev/null) == "../$1" ]] && printf '%s ' "${f##*/}"; done; true; }
# writable FILE yes|no: whether any write bit is set in FILE's mode
writable() { local m; m=$(stat -c %a "$1" 2>/dev/null) && [[ $(((8#$m & 8#222) ? 1 : 0)) == $([[ $2 == yes ]] && echo 1 || echo 0) ]]; }

sanitizer_clean() {
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$1"; then
		fail "no sanitizer report in $(basename "$1")"
		note "$1"
	fi
}

# ---------------------------------------------------------------- 1. fake target events

start_fake() {
	local event=$1 port
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		python3 "$target_py" --port "$port" --event "$event" >"$work/fake-$event.log" 2>&1 </dev/null &
		fake=$!
		if _targets_wait_listen "$fake" "$port" 10; then
			fake_url=iscsi://127.0.0.1:$port/iqn.2026-11.org.example:malicious/1
			return 0
		fi
		_targets_kill "$fake" 2
		fake=''
	done
	return 1
}

python3 "$target_py" --dump 0 4096 >"$work/pattern"
for event in busy task_set_full becoming_ready ua_reset; do
	start_fake "$event" || { fail "$event: fake target started"; continue; }
	if mount_gw "$fake_url" "$work/daemon-$event.log" -o rescan_interval=0; then
		t0=$(date +%s%N)
		if dd if="$mnt/lun1" of="$work/got" bs=4096 count=1 iflag=direct status=none 2>"$work/dd.log" &&
			cmp -s "$work/got" "$work/pattern"; then
			pass "$event: retried, the read returns the target's bytes ($((($(date +%s%N) - t0) / 1000000)) ms)"
		else
			fail "$event: retried, the read returns the target's bytes"
			note "$work/dd.log"
		fi
		unmount_gw
		check_eq "$event: fusermount3 -u, exit status" "$gw_status" 0
	else
		fail "$event: mounted"
	fi
	sanitizer_clean "$work/daemon-$event.log"
	_targets_kill "$fake" 2
	fake=''
done

# A LUN that stays "becoming ready": EIO once the retry budget (cmd_timeout) is spent.
if start_fake never_ready && mount_gw "$fake_url" "$work/daemon-never.log" -o rescan_interval=0,cmd_timeout=2; then
	t0=$(date +%s%N)
	rc=0
	timeout 20 dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>"$work/dd.log" || rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	if ((rc != 0 && rc != 124)) && grep -q 'Input/output error' "$work/dd.log" && ((ms >= 1500 && ms < 10000)); then
		pass "never_ready: EIO after the retry budget ($ms ms, cmd_timeout=2)"
	else
		fail "never_ready: EIO after the retry budget (dd exit $rc, $ms ms)"
		note "$work/dd.log"
	fi
	unmount_gw
	check_eq "never_ready: fusermount3 -u, exit status" "$gw_status" 0
	sanitizer_clean "$work/daemon-never.log"
else
	fail "never_ready: mounted"
fi
_targets_kill "$fake" 2
fake=''

# CAPACITY DATA HAS CHANGED with periodic rescans off: only the UNIT ATTENTION can grow the file.
if start_fake ua_capacity && mount_gw "$fake_url" "$work/daemon-cap.log" -o rescan_interval=0,log_level=info; then
	check_eq "ua_capacity: size before" "$(stat -c %s "$mnt/lun1")" 1048576
	check "ua_capacity: the read that meets the UNIT ATTENTION succeeds" \
		dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none || true
	if took=$(wait_for 5 size_is "$mnt/lun1" 2097152); then
		pass "ua_capacity: the file grows to 2 MiB (${took} s)"
	else
		fail "ua_capacity: the file grows to 2 MiB (size $(stat -c %s "$mnt/lun1"))"
	fi
	# the new half repeats the pattern
	if dd if="$mnt/lun1" of="$work/got" bs=4096 skip=256 count=1 iflag=direct status=none &&
		cmp -s "$work/got" "$work/pattern"; then
		pass "ua_capacity: the new area reads the target's bytes"
	else
		fail "ua_capacity: the new area reads the target's bytes"
	fi
	unmount_gw
	check_eq "ua_capacity: fusermount3 -u, exit status" "$gw_status" 0
	check "ua_capacity: the log names the LUN lun1 (\"$(grep -m1 'UNIT ATTENTION' "$work/daemon-cap.log")\")" \
		grep -q ': lun1: UNIT ATTENTION 2ah/09h' "$work/daemon-cap.log"
	check_eq "ua_capacity: no log line names a raw LUN field" "$(grep -c 'LUN field' "$work/daemon-cap.log" || true)" 0
	sanitizer_clean "$work/daemon-cap.log"
else
	fail "ua_capacity: mounted"
fi
_targets_kill "$fake" 2
fake=''

# A discard that falls back to WRITEs of zeroes (the fake target has no
# WRITE SAME) and meets BUSY 10 times: it backs off (10 ms doubling) like
# block I/O, where 8 immediate retries would have given up.
if start_fake busy_write && mount_gw "$fake_url" "$work/daemon-bw.log" -o rescan_interval=0,cache_size=0; then
	t0=$(date +%s%N)
	if out=$(timeout 60 python3 - "$mnt/lun1" <<'PY' 2>&1
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
fd = os.open(sys.argv[1], os.O_RDWR)
if libc.fallocate(fd, 0x03, 65536, 65536) != 0:  # PUNCH_HOLE | KEEP_SIZE
    sys.exit("fallocate: " + os.strerror(ctypes.get_errno()))
if os.pread(fd, 65536, 65536) != bytes(65536):
    sys.exit("the punched range does not read as zeroes")
PY
	); then
		pass "busy_write: the punch is written as zeroes after 10 BUSYs ($((($(date +%s%N) - t0) / 1000000)) ms)"
	else
		fail "busy_write: the punch is written as zeroes after 10 BUSYs"
		echo "#   $out"
	fi
	retries=$(awk '$1=="scsi_retries"{print $2}' "$mnt/.stats")
	check "busy_write: the retries are counted (.stats scsi_retries $retries)" test "${retries:-0}" -ge 10
	unmount_gw
	check_eq "busy_write: fusermount3 -u, exit status" "$gw_status" 0
	sanitizer_clean "$work/daemon-bw.log"
else
	fail "busy_write: mounted"
fi
_targets_kill "$fake" 2
fake=''

# ---------------------------------------------------------------- 2. tgtd: grow, add, remove

tgtd_start "$work/tgtd" 16M 0 >/dev/null
tgt_pid=$(<"$work/tgtd/pid")
ctl=$(<"$work/tgtd/ctl")
img=$work/tgtd/disk512.img
adm() { _tgtadm "$ctl" "$@" >/dev/null; }
# delete_lu N: tgtd refuses ("still active") while the LU has commands queued,
# e.g. the block cache's read-ahead behind a sequential read: ask again for 5 s.
delete_lu() {
	local i
	for ((i = 0; i < 50; i++)); do
		_tgtadm "$ctl" --op delete --mode logicalunit --tid 1 --lun "$1" >/dev/null 2>"$work/delete_lu.err" && return 0
		grep -q 'still active' "$work/delete_lu.err" || break
		sleep 0.1
	done
	cat "$work/delete_lu.err" >&2
	return 1
}

head -c 8M /dev/urandom >"$work/src"
if mount_gw "$TGT_URL" "$work/daemon-grow.log" -o rescan_interval=1; then
	check_eq "tgtd: listing" "$(lun_files)" "lun1 "
	check_eq "tgtd: lun1 size" "$(stat -c %s "$mnt/lun1")" 16777216
	dd if="$work/src" of="$mnt/lun1" bs=1M count=1 conv=notrunc,fsync status=none

	# grow: tgtd 1.0.85 reads the backing file's size when the LUN is added
	delete_lu 1
	truncate -s 32M "$img"
	adm --op new --mode logicalunit --tid 1 --lun 1 -b "$img"
	if took=$(wait_for 10 size_is "$mnt/lun1" 33554432); then
		pass "grow: lun1 follows 16 -> 32 MiB (${took} s, rescan_interval=1)"
	else
		fail "grow: lun1 follows 16 -> 32 MiB (size $(stat -c %s "$mnt/lun1"))"
	fi
	check "grow: old data still reads back" cmp -n 1048576 "$mnt/lun1" "$work/src"
	# the new area: written through the mount, found in the backing file
	dd if="$work/src" of="$mnt/lun1" bs=1M skip=2 seek=24 count=2 conv=notrunc,fsync status=none 2>"$work/dd.log" ||
		note "$work/dd.log"
	check "grow: a write beyond the old end lands in the backing file" \
		cmp "$work/src" "$img" 2097152 25165824 -n 2097152
	# written into the backing file, read through the mount
	dd if="$work/src" of="$img" bs=1M skip=5 seek=31 count=1 conv=notrunc status=none
	if dd if="$mnt/lun1" of="$work/got" bs=1M skip=31 count=1 iflag=direct status=none &&
		cmp -s "$work/got" <(dd if="$work/src" bs=1M skip=5 count=1 status=none); then
		pass "grow: the last MiB reads the backing file's bytes"
	else
		fail "grow: the last MiB reads the backing file's bytes"
	fi

	# add LUN 2
	truncate -s 8M "$work/lun2.img"
	adm --op new --mode logicalunit --tid 1 --lun 2 -b "$work/lun2.img"
	if took=$(wait_for 10 listing_is "lun1 lun2 "); then
		pass "add: lun2 appears (${took} s)"
	else
		fail "add: lun2 appears (listing: $(lun_files))"
	fi
	check_eq "add: lun2 size" "$(stat -c %s "$mnt/lun2" 2>/dev/null)" 8388608
	dd if="$work/src" of="$mnt/lun2" bs=1M count=1 conv=notrunc,fsync status=none 2>/dev/null || true
	check "add: lun2 is writable (data in its backing file)" cmp -n 1048576 "$work/src" "$work/lun2.img"
	links=$(byid_of lun2)
	if [[ $links == *wwn-0x* && $links == *t10-* ]]; then
		pass "add: lun2 gets its by-id/ links ($links)"
	else
		fail "add: lun2 gets its by-id/ links (by-id/: $(ls "$mnt/by-id" | tr '\n' ' '))"
	fi
	first=${links%% *}
	check "add: by-id/${first:-?} reads lun2" cmp -n 1048576 "$work/src" "$mnt/by-id/${first:-none}"

	# remove LUN 2 while a file on it is open
	exec 9<"$mnt/lun2"
	delete_lu 2
	if took=$(wait_for 10 listing_is "lun1 "); then
		pass "remove: lun2 disappears (${took} s)"
	else
		fail "remove: lun2 disappears (listing: $(lun_files))"
	fi
	rc=0
	dd of=/dev/null bs=4096 count=1 iflag=direct status=none <&9 2>"$work/dd.log" || rc=$?
	if ((rc != 0)) && grep -qE 'No such device|Input/output error' "$work/dd.log"; then
		pass "remove: a read on the open file fails ($(sed 's/.*: //' "$work/dd.log" | head -n 1))"
	else
		fail "remove: a read on the open file fails (dd exit $rc)"
		note "$work/dd.log"
	fi
	exec 9<&-
	check "remove: stat of the removed name fails" bash -c "! stat '$mnt/lun2' >/dev/null 2>&1"
	check_eq "remove: lun2's by-id/ links go" "$(byid_of lun2)" ""
	adm --op new --mode logicalunit --tid 1 --lun 2 -b "$work/lun2.img"
	if took=$(wait_for 10 listing_is "lun1 lun2 "); then
		pass "re-add: lun2 is back (${took} s)"
	else
		fail "re-add: lun2 is back"
	fi
	check "re-add: lun2 reads its data" cmp -n 1048576 "$mnt/lun2" "$work/src"
	check_eq "re-add: lun2's by-id/ links are back" "$(byid_of lun2)" "$links"

	# write protection: tgtd's readonly LU parameter sets the WP bit of MODE SENSE
	adm --op update --mode logicalunit --tid 1 --lun 2 --params readonly=1
	if took=$(wait_for 10 writable "$mnt/lun2" no); then
		pass "write protect: lun2 turns read-only (${took} s)"
	else
		fail "write protect: lun2 turns read-only (mode $(stat -c %a "$mnt/lun2"))"
	fi
	rc=0
	dd if="$work/src" of="$mnt/lun2" bs=4096 count=1 conv=notrunc oflag=direct status=none 2>"$work/dd.log" || rc=$?
	if ((rc != 0)) && grep -q 'Read-only file system' "$work/dd.log"; then
		pass "write protect: a write fails with EROFS"
	else
		fail "write protect: a write fails with EROFS (dd exit $rc)"
		note "$work/dd.log"
	fi
	adm --op update --mode logicalunit --tid 1 --lun 2 --params readonly=0
	if took=$(wait_for 10 writable "$mnt/lun2" yes); then
		pass "write protect off: lun2 is writable again (${took} s)"
	else
		fail "write protect off: lun2 is writable again (mode $(stat -c %a "$mnt/lun2"))"
	fi
	dd if="$work/src" of="$mnt/lun2" bs=1M skip=3 seek=2 count=1 conv=notrunc,fsync status=none 2>"$work/dd.log" || note "$work/dd.log"
	check "write protect off: a write lands in the backing file" cmp "$work/src" "$work/lun2.img" 3145728 2097152 -n 1048576
	unmount_gw
	check_eq "tgtd: fusermount3 -u, exit status" "$gw_status" 0
	sanitizer_clean "$work/daemon-grow.log"
else
	fail "tgtd: mounted"
	note "$work/daemon-grow.log"
fi

# With rescans off, the UNIT ATTENTION tgtd queues on LUN 1 when a LUN is added or deleted is what tells us.
if mount_gw "$TGT_URL" "$work/daemon-ua.log" -o rescan_interval=0; then
	truncate -s 4M "$work/lun3.img"
	adm --op new --mode logicalunit --tid 1 --lun 3 -b "$work/lun3.img"
	dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none || true
	if took=$(wait_for 5 listing_is "lun1 lun2 lun3 "); then
		pass "REPORTED LUNS DATA HAS CHANGED: lun3 appears with rescans off (${took} s)"
	else
		fail "REPORTED LUNS DATA HAS CHANGED: lun3 appears with rescans off (listing: $(lun_files))"
	fi
	delete_lu 3
	dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none || true
	if took=$(wait_for 5 listing_is "lun1 lun2 "); then
		pass "REPORTED LUNS DATA HAS CHANGED: lun3 goes with rescans off (${took} s)"
	else
		fail "REPORTED LUNS DATA HAS CHANGED: lun3 goes with rescans off (listing: $(lun_files))"
	fi
	unmount_gw
	check_eq "ua: fusermount3 -u, exit status" "$gw_status" 0
	sanitizer_clean "$work/daemon-ua.log"
else
	fail "ua: mounted"
fi

# ---------------------------------------------------------------- 3. stopping

nexus_count() { _tgtadm "$ctl" --op show --mode target | grep -c 'I_T nexus:' || true; }

head -c 24M /dev/urandom >"$work/src"
if mount_gw "$TGT_URL/1" "$work/daemon-term.log"; then
	rm -f "$work/marker"
	python3 - "$work/src" "$mnt/lun1" "$work/marker" >"$work/written" 2>"$work/writer.log" <<'PY' &
import os, sys, time
src, dst, marker = sys.argv[1:4]
data = open(src, "rb").read()
fd = os.open(dst, os.O_WRONLY)
done = 0
try:
    while done < len(data):
        done += os.write(fd, data[done:done + 16384])
        if done >= 1 << 20:
            if not os.path.exists(marker):
                open(marker, "w").close()
            time.sleep(0.005)  # past the first MiB, 16 KiB per 5 ms: still busy when SIGTERM comes
except OSError as e:
    print("writer stopped: %s" % e.strerror, file=sys.stderr)
print(done)
PY
	writer=$!
	wait_for 20 test -e "$work/marker" >/dev/null || true
	check_eq "SIGTERM: one session before" "$(nexus_count)" 1
	busy=0
	kill -0 "$writer" 2>/dev/null && busy=1
	kill -TERM "$daemon"
	st=0
	wait "$daemon" || st=$?
	daemon=''
	wait "$writer" || true
	n=$(cat "$work/written")
	# The writer was still running at the signal and was stopped by it: its
	# next write failed before it had written all 24 MiB.
	if ((busy)) && grep -q '^writer stopped: ' "$work/writer.log" && [[ -n $n ]] && ((n < 24 << 20)); then
		pass "SIGTERM came while the writer was busy (stopped after $n of $((24 << 20)) bytes)"
	else
		fail "SIGTERM came while the writer was busy (running at the signal: $busy, wrote ${n:-?} of $((24 << 20)) bytes, $(cat "$work/writer.log"))"
	fi
	check_eq "SIGTERM with a writer busy: exit status" "$st" 0
	if [[ -n $n ]] && ((n >= 1048576)) && cmp -s -n "$n" "$work/src" "$img"; then
		pass "SIGTERM: the $n bytes acknowledged to the writer are in the backing file ($(cat "$work/writer.log"))"
	else
		fail "SIGTERM: the bytes acknowledged to the writer are in the backing file (n=$n)"
	fi
	check_eq "SIGTERM: logged out (no I_T nexus left)" "$(nexus_count)" 0
	check "SIGTERM: unmounted" bash -c "! grep -qF ' $mnt ' /proc/mounts"
	sanitizer_clean "$work/daemon-term.log"
else
	fail "SIGTERM: mounted"
fi

# SIGTERM under load: fio at QD32 (512 KiB direct reads, whose replies take
# longer to send), six times.  The drain must wait for each command's
# callback, FUSE reply included, before the channel closes: else libfuse
# prints "fuse: writing device: Bad file descriptor" on its own (about one
# stop in two before that fix).  Nothing on stderr lacks "iserfuse: ".
if command -v fio >/dev/null 2>&1; then
	stops=0 busy=0 clean=0
	: >"$work/daemon-load.log"
	for round in 1 2 3 4 5 6; do
		mount_gw "$TGT_URL/1" "$work/daemon-load-$round.log" || break
		fio --name=load --filename="$mnt/lun1" --ioengine=libaio --direct=1 --iodepth=32 --rw=randread --bs=512k \
			--time_based --runtime=30 --output=/dev/null >/dev/null 2>&1 &
		fio_pid=$!
		sleep 1
		kill -0 "$fio_pid" 2>/dev/null && busy=$((busy + 1))
		kill -TERM "$daemon"
		st=0
		wait "$daemon" || st=$?
		daemon=''
		kill "$fio_pid" 2>/dev/null || true
		wait "$fio_pid" 2>/dev/null || true
		fusermount3 -uz "$mnt" 2>/dev/null || true
		stops=$((stops + 1))
		((st == 0)) && clean=$((clean + 1))
		cat "$work/daemon-load-$round.log" >>"$work/daemon-load.log"
	done
	check_eq "SIGTERM under fio QD32: $stops stops, fio busy at each, each exit 0" "$stops $busy $clean" "6 6 6"
	if unprefixed=$(grep -v '^iserfuse: ' "$work/daemon-load.log"); then
		fail "SIGTERM under fio QD32: no stderr line without 'iserfuse: ' ($(echo "$unprefixed" | sort | uniq -c | tr -s ' \n' ' '))"
	else
		pass "SIGTERM under fio QD32: no stderr line without 'iserfuse: '"
	fi
	sanitizer_clean "$work/daemon-load.log"
else
	skip "SIGTERM under fio QD32" "fio not installed"
fi

if mount_gw "$TGT_URL/1" "$work/daemon-stuck.log"; then
	dd if="$work/src" of="$mnt/lun1" bs=64k count=16 conv=notrunc status=none
	kill -STOP "$tgt_pid"
	# a write in flight that the stopped target never answers: the drain waits for it
	dd if="$work/src" of="$mnt/lun1" bs=64k count=1 seek=100 conv=notrunc oflag=direct status=none 2>/dev/null &
	stuck_dd=$!
	sleep 0.5
	kill -TERM "$daemon"
	sleep 1
	check "stuck drain: the first SIGTERM waits for the target" kill -0 "$daemon"
	t0=$(date +%s%N)
	kill -TERM "$daemon"
	st=0
	wait "$daemon" || st=$?
	daemon=''
	ms=$((($(date +%s%N) - t0) / 1000000))
	kill -CONT "$tgt_pid"
	wait "$stuck_dd" 2>/dev/null || true
	check_eq "stuck drain: a second SIGTERM exits with status 2" "$st" 2
	if ((ms < 2000)); then pass "stuck drain: at once ($ms ms)"; else fail "stuck drain: at once ($ms ms)"; fi
	grep -q 'stopped by a second signal' "$work/daemon-stuck.log" && pass "stuck drain: says why" ||
		fail "stuck drain: says why"
	fusermount3 -uz "$mnt" 2>/dev/null || true
else
	fail "stuck drain: mounted"
fi
summary
