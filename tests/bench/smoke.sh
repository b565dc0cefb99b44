#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Smoke test of the null target that tests/bench/run measures against:
#
#   smoke.sh NULLTARGET ISERFUSE_PERF ISERFUSE
#
# Starts tests/bench/nulltarget on a free loopback port, then
# 1. iserfuse-perf: 4 KiB random reads and writes for 2 s at QD1 and QD32,
#    each with 0 errors and more than 0 I/Os;
# 2. iscsi-perf (libiscsi-bin), if installed: 4 KiB random reads for 2 s at
#    QD32 with an average above 0 (else a skip line);
# 3. as root with /dev/fuse: the gateway mounted on it (-o cache_size=0)
#    writes and reads 4 MiB with dd O_DIRECT (exit status and bytes; the
#    reads are zeroes) and unmounts (else a skip line);
# and the target is still running at the end.
# Prints "ok - " / "not ok - " / "skip - " lines and the summary.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"

if [[ $# -ne 3 || ! -x $1 || ! -x $2 || ! -x $3 ]]; then
	echo "usage: $0 NULLTARGET ISERFUSE_PERF ISERFUSE" >&2
	exit 2
fi
nulltarget=$1 perf=$2 iserfuse=$3
iqn=iqn.2026-11.org.example:null

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-bench-smoke.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
nt_pid=''
cleanup() {
	set +e
	mountpoint -q "$mnt" && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null; }
	[[ -n $nt_pid ]] && _targets_kill "$nt_pid" 5
	rm -rf "$work"
}
trap cleanup EXIT

# ------------------------------------------------------------ the target
port=''
for _ in 1 2 3 4 5; do
	p=$(free_port)
	"$nulltarget" "$p" "$iqn" >"$work/nulltarget.log" 2>&1 &
	nt_pid=$!
	if _targets_wait_listen "$nt_pid" "$p" 5; then
		port=$p
		break
	fi
	_targets_kill "$nt_pid" 5 # lost the port to someone else: another one
	nt_pid=''
done
if [[ -z $port ]]; then
	fail "nulltarget listens"
	note "$work/nulltarget.log"
	summary
	exit 1
fi
pass "nulltarget listens on 127.0.0.1:$port"
url=iscsi://127.0.0.1:$port/$iqn/1

# ------------------------------------------------------------ iserfuse-perf
for rw in read write; do
	for qd in 1 32; do
		flags=(-r)
		[[ $rw == write ]] && flags+=(-w)
		rc=0
		out=$(timeout 30 "$perf" -m "$qd" -b 8 "${flags[@]}" -t 2 "$url" 2>"$work/perf.err") || rc=$?
		ios=$(awk '$1 == "ios" { print $2 }' <<<"$out")
		errors=$(awk '$1 == "errors" { print $2 }' <<<"$out")
		if [[ $rc == 0 && $errors == 0 && ${ios:-0} -gt 0 ]]; then
			pass "iserfuse-perf random $rw QD$qd: $ios I/Os, 0 errors"
		else
			fail "iserfuse-perf random $rw QD$qd (exit $rc, ios '${ios:-}', errors '${errors:-}')"
			note "$work/perf.err"
		fi
	done
done

# ------------------------------------------------------------ iscsi-perf
if command -v iscsi-perf >/dev/null 2>&1; then
	rc=0
	out=$(timeout 30 iscsi-perf -m 32 -b 8 -r -t 2 "$url" 2>"$work/iscsi-perf.err" | tr '\r' '\n') || rc=$?
	avg=$(sed -n 's/^iops average \([0-9]*\).*/\1/p' <<<"$out" | tail -n 1)
	if [[ $rc == 0 && ${avg:-0} -gt 0 ]]; then
		pass "iscsi-perf random read QD32: $avg IOPS"
	else
		fail "iscsi-perf random read QD32 (exit $rc, average '${avg:-}')"
		note "$work/iscsi-perf.err"
	fi
else
	skip "iscsi-perf" "not installed (libiscsi-bin)"
fi

# ------------------------------------------------------------ the gateway
if [[ $(id -u) -ne 0 || ! -c /dev/fuse ]]; then
	skip "gateway on the null target" "needs root and /dev/fuse"
elif ! "$iserfuse" -o cache_size=0 -o log_file="$work/daemon.log" "$url" "$mnt" 2>"$work/mount.err"; then
	fail "gateway mounts the null target"
	note "$work/mount.err"
	note "$work/daemon.log"
else
	check "gateway mounts the null target: lun1" test -e "$mnt/lun1"
	rc=0
	dd if=/dev/zero of="$mnt/lun1" bs=1M count=4 oflag=direct conv=notrunc 2>"$work/dd.w" || rc=$?
	check_eq "dd O_DIRECT write of 4 MiB: exit status" "$rc" 0
	check_eq "dd O_DIRECT write of 4 MiB: bytes" "$(sed -n 's/^\([0-9]*\) bytes.*/\1/p' "$work/dd.w")" 4194304
	rc=0
	dd if="$mnt/lun1" of="$work/read" bs=1M count=4 iflag=direct skip=1 2>"$work/dd.r" || rc=$?
	check_eq "dd O_DIRECT read of 4 MiB: exit status" "$rc" 0
	check_eq "dd O_DIRECT read of 4 MiB: bytes" "$(stat -c %s "$work/read" 2>/dev/null || echo 0)" 4194304
	check "dd O_DIRECT read of 4 MiB: zeroes" cmp -s -n 4194304 "$work/read" /dev/zero
	fusermount3 -u "$mnt" 2>"$work/umount.err" || true
	check "gateway unmounts" bash -c "! mountpoint -q '$mnt'"
fi

check "nulltarget still running" _targets_alive "$nt_pid"
summary
