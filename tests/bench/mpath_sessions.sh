#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sessions per portal, side by side (a manual benchmark, not a test: meson
# does not run it):
#
#   sudo tests/bench/mpath_sessions.sh build/iserfuse [SECONDS [ROUNDS]]
#
# One tgtd on 127.0.0.1 (tests/lib/targets.sh) with a 256 MiB LUN written
# once in full; then ROUNDS rounds (default 3), each mounting the LUN with
# -o sessions=1 and then -o sessions=2 (cache_size=0, so every read goes to
# the target) and running fio 4 KiB random reads at iodepth 32 (libaio,
# O_DIRECT) for SECONDS (default 10) on each.  Prints each run's IOPS and
# the paths_up .stats showed, then per setting the best round and the
# spread ((best - worst) / best) across rounds:
#   sessions=1  best 41234 IOPS  spread 3.1 %  (41234 40511 39950)
# Root (tgtd, a mount), fio, python3.  On a machine others use, run it
# under nice and read the spread before the difference.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mount.sh
. "$here/../lib/mount.sh"

if [[ $# -lt 1 || $# -gt 3 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE [SECONDS [ROUNDS]]" >&2
	exit 2
fi
iserfuse=$1
secs=${2:-10}
rounds=${3:-3}
if [[ $(id -u) -ne 0 ]]; then
	echo "$0: needs root (tgtd, a mount)" >&2
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-mpath-sessions.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
daemon=''
cleanup() {
	set +e
	force_unmount "$mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	tgtd_stop "$work/tgtd"
	rm -rf "$work"
}
trap cleanup EXIT

tgtd_start "$work/tgtd" 256M 0 >/dev/null
# reads of a sparse file cost the target less than reads of data: write it all once
dd if=/dev/urandom of="$work/tgtd/disk512.img" bs=1M count=256 conv=notrunc status=none

# run N ROUND: mount with sessions=N, fio for $secs s, unmount; prints the IOPS
run() {
	local n=$1 r=$2 up
	"$iserfuse" -f -o "initiator_name=iqn.2026-11.org.example:bench,cache_size=0,sessions=$n" \
		"$TGT_URL/1" "$mnt" 2>>"$work/daemon.log" &
	daemon=$!
	wait_lun "$mnt" 200 "$daemon"
	sleep 1 # extra sessions come up in the background
	up=$(awk '$1 == "paths_up" { print $2 }' "$mnt/.stats")
	fio --name="s$n-r$r" --filename="$mnt/lun1" --size=256M --bs=4k --rw=randread --ioengine=libaio \
		--direct=1 --iodepth=32 --time_based --runtime="$secs" --output-format=json \
		--output="$work/s$n-r$r.json" >/dev/null
	fusermount3 -u "$mnt"
	# a mount namespace made meanwhile (ip netns exec, unshare -m) keeps the mount alive there
	wait_exit "$daemon" 200 || kill -TERM "$daemon" 2>/dev/null || true
	wait "$daemon" || true
	daemon=''
	python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' \
		"$work/s$n-r$r.json" >"$work/s$n-r$r.iops"
	echo "round $r  sessions=$n  $(<"$work/s$n-r$r.iops") IOPS  (paths_up ${up:-not in .stats})"
}

for ((r = 1; r <= rounds; r++)); do
	run 1 "$r"
	run 2 "$r"
done
for n in 1 2; do
	python3 - "$n" "$work"/s"$n"-r*.iops <<'PY'
import sys
v = [int(open(f).read()) for f in sys.argv[2:]]
best, worst = max(v), min(v)
spread = 100.0 * (best - worst) / best if best else 0.0
print("sessions=%s  best %d IOPS  spread %.1f %%  (%s)" % (sys.argv[1], best, spread, " ".join(map(str, v))))
PY
done
