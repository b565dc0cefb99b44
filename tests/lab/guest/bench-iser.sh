#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-iser.sh - inside the lab guest (tests/bench/iser.sh boots it): 4 KiB
# random reads over iSER at QD 1 and 32 on soft-RoCE, four initiators against
# one target, series interleaved cell by cell, BENCH_ROUNDS rounds (default
# 3), BENCH_SECONDS per cell (default 5), best kept, range printed:
#
#   raw       BUILD/tests/iserfuse-perf -m QD -b 8 -r (initiator/ + cache/pool)
#   gateway   fio libaio direct=1 randread on BUILD/iserfuse's LUN file,
#             -o transport=iser,cache_size=0
#   libiscsi  iscsi-perf -m QD -b 8 -r "...?iser" (random reads, as the rest)
#   kernel    the kernel's ib_iser: iscsid + iscsiadm (iface iser) log in,
#             fio libaio direct=1 randread on the /dev/sdX it attaches
#             (scheduler none), logged out at the end
#
# Target: LIO (lio-up.sh, iser=1, 192.0.2.2:3261, LUN 0) when the kernel
# initiator logs in to it, else tgtd's iSER target (tgt-up.sh, :3260, LUN 1);
# the same target for all four series (BENCH_TARGET=tgt: tgtd straight away).
# Every series reads the whole 1 GiB LUN (sparse file on the guest's tmpfs).
# The guest runs under TCG: the figures compare paths within one boot, never
# hardware.
#   bench-iser.sh BUILD_DIR [OUT_DIR]
set -uo pipefail
BUILD=$1
OUT=${2:-/lab}
HERE=$(cd "$(dirname "$0")" && pwd)
SECS=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
PORTAL_IP=192.0.2.2
NAME=iqn.2024-01.lab.rdma:iserfuse-bench
PERF_NAME=iqn.2026-11.org.example:iserfuse-perf
LIB_NAME=iqn.2010-11.libiscsi:iscsi-perf
MNT=$(mktemp -d /tmp/bench-mnt.XXXXXX)
ROWS=$OUT/bench-iser.rows
: > "$ROWS"
say() { echo "bench-iser: $*" >&2; }

bash "$HERE/rxe-up.sh" > "$OUT/rxe.log" 2>&1 || { say "rdma_rxe up failed (rxe.log)"; exit 1; }
modprobe fuse
modprobe ib_iser || { say "no ib_iser module"; exit 1; }
modprobe sd_mod 2>/dev/null || true

# ------------------------------------------------------------ kernel initiator
IQN= PORT= LUN= SDEV= ISCSID_PID=
start_iscsid() {
	command -v iscsid > /dev/null || { say "no iscsid (install open-iscsi on the host)"; return 1; }
	mkdir -p /etc/iscsi /run/lock/iscsi /var/lib/iscsi
	grep -q '^InitiatorName=' /etc/iscsi/initiatorname.iscsi 2>/dev/null ||
		echo "InitiatorName=iqn.2024-01.lab.rdma:kernel" > /etc/iscsi/initiatorname.iscsi
	# its own process group: on SIGTERM iscsid signals the whole group
	setsid iscsid -f > "$OUT/iscsid.log" 2>&1 &
	ISCSID_PID=$!
	for _ in $(seq 50); do
		ss -xl 2>/dev/null | grep -q ISCSIADM_ABSTRACT_NAMESPACE && return 0
		sleep 0.2
	done
	say "iscsid did not come up (iscsid.log)"
	return 1
}
kernel_login() { # target iqn, port, lun -> SDEV
	local t=$1 p=$2 l=$3 blk
	# no NOP-Out pings: under TCG a NOP-In can take over the 5 s timeout
	# while the session is loaded, and the recovery that follows stalls a cell
	iscsiadm -m node -o new -T "$t" -p "$PORTAL_IP:$p" -I iser > /dev/null &&
		iscsiadm -m node -T "$t" -p "$PORTAL_IP:$p" -I iser -o update \
			-n 'node.conn[0].timeo.noop_out_interval' -v 0 &&
		iscsiadm -m node -T "$t" -p "$PORTAL_IP:$p" -I iser -o update \
			-n 'node.conn[0].timeo.noop_out_timeout' -v 0 &&
		iscsiadm -m node -T "$t" -p "$PORTAL_IP:$p" -I iser --login || return 1
	for _ in $(seq 100); do
		for blk in /sys/class/iscsi_session/session*/device/target*/*:*:*:"$l"/block/sd*; do
			[ -e "$blk" ] || continue
			[ -b "/dev/${blk##*/}" ] || continue
			SDEV=/dev/${blk##*/}
			echo none > "/sys/block/${blk##*/}/queue/scheduler" 2>/dev/null
			return 0
		done
		sleep 0.2
	done
	say "logged in to $t but no sd device at LUN $l"
	return 1
}
kernel_logout() { # target iqn, port
	iscsiadm -m node -T "$1" -p "$PORTAL_IP:$2" -I iser --logout > /dev/null 2>&1
	iscsiadm -m node -o delete -T "$1" -p "$PORTAL_IP:$2" -I iser > /dev/null 2>&1
	SDEV=
}

start_iscsid >> "$OUT/login.log" 2>&1 || { say "no kernel initiator"; exit 1; }
TARGET=
if [ "${BENCH_TARGET:-lio}" != lio ]; then
	say "BENCH_TARGET=${BENCH_TARGET}: tgtd"
elif bash "$HERE/lio-up.sh" 1G > "$OUT/lio.log" 2>&1; then
	if kernel_login iqn.2024-01.lab.rdma:lio 3261 0 >> "$OUT/login.log" 2>&1; then
		TARGET=lio IQN=iqn.2024-01.lab.rdma:lio PORT=3261 LUN=0
	else
		say "ib_iser login to LIO failed (login.log): tgtd instead"
		kernel_logout iqn.2024-01.lab.rdma:lio 3261
	fi
else
	say "LIO did not come up (lio.log): tgtd instead"
fi
if [ -z "$TARGET" ]; then
	export TGT_INITIATORS="$NAME $PERF_NAME"  # (tgt-up.sh adds initiatorname.iscsi's)
	bash "$HERE/tgt-up.sh" 1G > "$OUT/tgt.log" 2>&1 || { say "tgtd up failed (tgt.log)"; exit 1; }
	kernel_login iqn.2024-01.lab.rdma:tgt-iser 3260 1 >> "$OUT/login.log" 2>&1 ||
		{ say "ib_iser login to tgtd failed too (login.log)"; exit 1; }
	TARGET=tgt IQN=iqn.2024-01.lab.rdma:tgt-iser PORT=3260 LUN=1
fi
URL="iscsi://$PORTAL_IP:$PORT/$IQN/$LUN"
KSESSION=$(iscsiadm -m session 2>/dev/null | head -n 1)
SYS=/sys/block/${SDEV#/dev/}
KDEV="$SDEV (queue_depth $(cat "$SYS/device/queue_depth" 2>/dev/null),"
KDEV+=" scheduler $(sed 's/.*\[\(.*\)\].*/\1/' "$SYS/queue/scheduler" 2>/dev/null))"

# ------------------------------------------------------------ the gateway
LOG=$OUT/iserfuse.log
"$BUILD/iserfuse" -o "initiator_name=$NAME,log_file=$OUT/iserfuse-daemon.log" -o transport=iser,cache_size=0 \
	"$URL" "$MNT" > "$LOG" 2>&1 ||
	say "iserfuse exit $? (iserfuse.log)"
for _ in $(seq 300); do [ -e "$MNT/lun$LUN" ] && break; sleep 0.1; done
[ -e "$MNT/lun$LUN" ] || say "no $MNT/lun$LUN (iserfuse.log): gateway cells fail"

# ------------------------------------------------------------ cells (each prints IOPS or nothing)
cell_raw() {
	timeout $((SECS + 60)) "$BUILD/tests/iserfuse-perf" -m "$1" -b 8 -r -t "$SECS" "$URL?iser" 2>> "$OUT/raw.err" |
		awk '$1 == "iops" { print $2 }'
}
cell_fio() { # FILE QD
	timeout $((SECS + 60)) fio --name=r --filename="$1" --rw=randread --bs=4k --direct=1 \
		--ioengine=libaio --iodepth="$2" --runtime="$SECS" --time_based --output-format=terse 2>> "$OUT/fio.err" |
		awk -F';' '{ printf "%.0f\n", $8 }'
}
cell_gateway() { [ -e "$MNT/lun$LUN" ] && cell_fio "$MNT/lun$LUN" "$1"; }
cell_kernel() { [ -n "$SDEV" ] && cell_fio "$SDEV" "$1"; }
cell_libiscsi() {
	timeout $((SECS + 60)) iscsi-perf -i "$LIB_NAME" -m "$1" -b 8 -r -t "$SECS" "$URL?iser" 2>> "$OUT/libiscsi.err" |
		tr '\r' '\n' | sed -n 's/^iops average \([0-9]*\).*/\1/p' | tail -n 1
}

say "target $TARGET ($URL?iser), kernel device $SDEV, $ROUNDS rounds of ${SECS}s cells"
T0=$SECONDS
for r in $(seq "$ROUNDS"); do
	for qd in 1 32; do
		for s in raw gateway libiscsi kernel; do
			v=$("cell_$s" "$qd")
			echo "$s $qd $r ${v:-failed}" >> "$ROWS"
			say "round $r qd $qd $s: ${v:-failed}"
		done
	done
done

say "cells took $((SECONDS - T0)) s"
fusermount3 -u "$MNT" 2>/dev/null
kernel_logout "$IQN" "$PORT"
iscsiadm -k 0 > /dev/null 2>&1 || kill "$ISCSID_PID" 2>/dev/null
[ -e /run/tgtd.pid ] && kill "$(cat /run/tgtd.pid)" 2>/dev/null

# ------------------------------------------------------------ report
echo "4 KiB random read over iSER, IOPS (soft-RoCE in a TCG guest, target $TARGET $URL," \
	"${SECS}s cells, best of $ROUNDS rounds, (min-max))"
echo "kernel: $KDEV, session $KSESSION, NOP-Out off," \
	"connection recoveries $(grep -c 'Kernel reported iSCSI connection' "$OUT/iscsid.log")"
awk -v rounds="$ROUNDS" '
	$4 != "failed" { v[$1, $2, $3] = $4; if (!(($1, $2) in best) || $4 > best[$1, $2]) best[$1, $2] = $4
		if (!(($1, $2) in lo) || $4 < lo[$1, $2]) lo[$1, $2] = $4; if ($4 > hi[$1, $2]) hi[$1, $2] = $4 }
	function cell(s, q) { return ((s, q) in best) ? sprintf("%9d (%d-%d)", best[s, q], lo[s, q], hi[s, q]) : sprintf("%9s %13s", "n/a", "") }
	function ratio(a, b, q, op, goal,   x, r, mn, mx, n, line) {
		line = sprintf("ratio iser %s/%s qd%d: ", a, b, q)
		if (!((a, q) in best) || !((b, q) in best) || best[b, q] == 0) { print line "n/a"; return }
		x = best[a, q] / best[b, q]; line = line sprintf("%.3f", x); n = 0
		for (r = 1; r <= rounds; r++)
			if ((a, q, r) in v && (b, q, r) in v && v[b, q, r] > 0) {
				y = v[a, q, r] / v[b, q, r]; if (!n || y < mn) mn = y; if (!n || y > mx) mx = y; n++ }
		if (n) line = line sprintf(" (rounds %.3f-%.3f)", mn, mx)
		if (op != "") line = line sprintf(" goal >= %s %s", goal, x >= goal ? "PASS" : "MISS")
		print line
	}
	END {
		printf "%-10s %23s %23s\n", "series", "QD1", "QD32"
		n = split("raw gateway libiscsi kernel", S, " ")
		for (i = 1; i <= n; i++) printf "%-10s %23s %23s\n", S[i], cell(S[i], 1), cell(S[i], 32)
		ratio("gateway", "libiscsi", 32, ">=", "1.0"); ratio("raw", "libiscsi", 32, ">=", "1.5")
		ratio("gateway", "kernel", 32, "", ""); ratio("raw", "kernel", 32, "", "")
		ratio("gateway", "libiscsi", 1, "", ""); ratio("raw", "libiscsi", 1, "", "")
		ratio("gateway", "kernel", 1, "", ""); ratio("raw", "kernel", 1, "", "")
	}' "$ROWS"
grep -q failed "$ROWS" && { echo "failed cells: $(grep -c failed "$ROWS") (see $OUT/*.err, iserfuse.log)"; exit 1; }
exit 0
