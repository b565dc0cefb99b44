#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# iSER benchmark in the lab guest (not part of `meson test`; needs root).
#
#   tests/bench/iser.sh
#
# Boots tests/lab's QEMU guest once (soft-RoCE, LIO with iSER) and runs
# tests/lab/guest/bench-iser.sh there: 4 KiB random reads at QD 1 and 32
# over iSER from iserfuse-perf (raw), fio on the iserfuse mount (gateway),
# libiscsi's iscsi-perf (libiscsi) and the kernel's ib_iser initiator
# logged in with open-iscsi (kernel), interleaved, best of BENCH_ROUNDS
# (default 3) rounds of BENCH_SECONDS (default 5) s cells, then ratio lines
# with the goals gateway/libiscsi qd32 >= 1.0 and raw/libiscsi qd32 >= 1.5
# (PASS/MISS).  The guest runs under TCG: compare the series, not machines.
#
# BUILD_DIR (default build/, inside the source tree, which is shared into
# the guest) is set up and built as needed.  open-iscsi (iscsiadm, iscsid) is
# installed with apt-get when iscsiadm is missing; its services are not
# started on the host.  The guest's files (the rows, logs) go to a fresh
# directory under /var/tmp, printed at the end.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if (($#)); then
	echo "usage: $0 (no arguments; BUILD_DIR, BENCH_ROUNDS, BENCH_SECONDS in the environment)" >&2
	exit 2
fi
BUILD=$(realpath -m "${BUILD_DIR:-$SRC/build}")
case $BUILD in "$SRC"/*) ;; *) echo "iser.sh: BUILD_DIR must be inside $SRC (shared into the guest)" >&2; exit 1 ;; esac
[ "$(id -u)" = 0 ] || { echo "iser.sh: needs root (QEMU 9p export of /, apt-get)" >&2; exit 1; }
[ -d "$BUILD" ] || meson setup "$BUILD" "$SRC"
ninja -C "$BUILD" iserfuse tests/iserfuse-perf > /dev/null

if ! command -v iscsiadm > /dev/null; then
	echo "iser.sh: installing open-iscsi" >&2
	prc=/usr/sbin/policy-rc.d made=0
	# keep its postinst from starting iscsid on the host
	if [ ! -e $prc ]; then printf '#!/bin/sh\nexit 101\n' > $prc; chmod +x $prc; made=1; fi
	rc=0
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends open-iscsi > /dev/null ||
		{ apt-get update > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends open-iscsi > /dev/null; } ||
		rc=$?
	[ $made = 1 ] && rm -f $prc
	[ $rc = 0 ] || { echo "iser.sh: apt-get install open-iscsi failed" >&2; exit 1; }
fi

OUT=$(mktemp -d /var/tmp/iserfuse-bench-iser.XXXXXX)
rc=0
bash "$SRC/tests/lab/run-in-guest.sh" -t "${ISER_BENCH_TIMEOUT:-300}" -s "$SRC" -o "$OUT" -C "$SRC" \
	-e "BENCH_SECONDS=${BENCH_SECONDS:-5}" -e "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" -- \
	bash "$SRC/tests/lab/guest/bench-iser.sh" "$BUILD" /lab || rc=$?
echo "# lab output in $OUT"
exit $rc
