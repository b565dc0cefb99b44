#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "direct" test of the target suite: direct send at idle over TCP.
# target_io qd1 reads 1000 blocks one at a time from tgtd; each command is
# to be written to the socket by the thread that submitted it (tx_direct)
# rather than by the event thread woken for it (tx_kicks): at least 95 %
# direct and under 5 % kicks, without digests and with HeaderDigest and
# DataDigest CRC32C; the event thread wakes about once per read (the
# response), under 1.5 per read.  Then 4000 reads with up to 32 in flight,
# all submitted from one thread: the event thread sends them in its
# batches (a send per command from the submitter costs more CPU per I/O):
# under 5 % sent by the submitter, and fewer event-thread wake-ups than
# reads.  These ratios are checked in a plain build only: in a sanitizer
# build (target_io linked with libasan or libubsan) the event thread is 2-3
# times slower, so each ratio is a counted skip there; the reads and the
# digests are checked in both.
#
#   direct.sh TARGET_IO
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root, 2 on bad usage.
# Needs: tgt.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 "TARGET_IO" "$@"
target_io=$1
need_exe "$target_io"
need_root "the direct test runs tgtd, which needs root"
need_tools tgtd tgtadm timeout ss

suite_scratch direct
suite_drop=('tgtd/*.img')
suite_teardown() {
	tgtd_stop "$work/tgtd"
}

if ! tgtd_start "$work/tgtd" 16M 16M >/dev/null 2>"$work/start.err"; then
	fail "tgtd started"
	note "$work/start.err"
	echo "$passed passed, $failed failed"
	exit 1
fi
pass "tgtd started ($TGT_URL)"
ctl=$(<"$work/tgtd/ctl")

# a sanitizer build: the reason its ratios are skipped, else empty
sanitized=''
if ldd "$target_io" 2>/dev/null | grep -qE 'lib(a|ub)san\.so'; then
	sanitized="a sanitizer build (the event thread 2-3 times slower): checked in the plain build only"
fi

# ratio WHAT TEST...: a scheduling ratio, checked as `check` in a plain build, skipped in a sanitizer build
ratio() {
	if [[ -n $sanitized ]]; then skip "$1" "$sanitized"; else check "$@"; fi
}

field() {
	awk -v k="$2" '$1 == k { print $2; exit }' <<<"$1"
}

# run_io LABEL ARGS...: target_io ARGS into $out; a failure line and 1 when it fails.
run_io() {
	local label=$1 rc=0
	shift
	out=$(timeout 120 "$target_io" "$@" 2>"$work/err") || rc=$?
	if ((rc != 0)); then
		fail "$label: target_io $1 exits 0 (exit $rc)"
		note "$work/err"
		return 1
	fi
}

# qd1_reads LABEL HD DD WANT: 1000 QD1 reads with these digest choices,
# WANT the digests negotiated ("header data", 0 or 1 each).
qd1_reads() {
	local out
	TARGET_IO_HEADER_DIGEST=$2 TARGET_IO_DATA_DIGEST=$3 run_io "$1" qd1 "$TGT_URL/1" 1000 || return 0
	local reads direct kicks wakes
	reads=$(field "$out" reads)
	direct=$(field "$out" tx_direct)
	kicks=$(field "$out" tx_kicks)
	wakes=$(field "$out" event_wakeups)
	check_eq "$1: digests negotiated (header data)" "$(field "$out" header_digest) $(field "$out" data_digest)" "$4"
	check_eq "$1: 1000 reads done" "$reads" 1000
	ratio "$1: $direct of 1000 reads sent by their submitter (>= 950)" test "${direct:-0}" -ge 950
	ratio "$1: $kicks event-thread kicks (< 50)" test "${kicks:-50}" -lt 50
	ratio "$1: $wakes event-thread wake-ups for 1000 reads (< 1500)" test "${wakes:-1500}" -lt 1500
}

qd1_reads "no digests" none none "0 0"
if _tgtadm "$ctl" --op update --mode target --tid 1 --name HeaderDigest --value CRC32C &&
	_tgtadm "$ctl" --op update --mode target --tid 1 --name DataDigest --value CRC32C; then
	qd1_reads "CRC32C digests" crc32c crc32c "1 1"
else
	fail "tgtadm sets HeaderDigest=CRC32C and DataDigest=CRC32C"
fi

# qd32_reads: 4000 reads, up to 32 in flight.
qd32_reads() {
	local out
	run_io QD32 qd "$TGT_URL/1" 4000 32 || return 0
	local reads direct wakes
	reads=$(field "$out" reads)
	direct=$(field "$out" tx_direct)
	wakes=$(field "$out" event_wakeups)
	check_eq "QD32: 4000 reads done" "$reads" 4000
	ratio "QD32: $direct of 4000 reads sent by their submitter (< 200: the event thread batches the rest)" \
		test "${direct:-200}" -lt 200
	ratio "QD32: $wakes event-thread wake-ups for 4000 reads (< 4000)" test "${wakes:-4000}" -lt 4000
}

qd32_reads

summary
