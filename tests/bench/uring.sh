#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# FUSE over /dev/fuse against FUSE over io_uring through the gateway (not
# part of `meson test`; needs root and a kernel with CONFIG_FUSE_IO_URING):
#
#   tests/bench/uring.sh [BUILD_DIR]
#
# A private tgtd with a null LUN (tgt's "null" backing store), three mounts
# of it with -o cache_size=0: io_uring=off (/dev/fuse), io_uring=on with a
# ring thread per CPU queue (ISERFUSE_URING_THREADS=<possible CPUs>), and
# io_uring=on with one ring thread for all queues (ISERFUSE_URING_THREADS=1).  fio 4 KiB randread/randwrite, libaio,
# direct=1, QD1 and QD32, CELL_SECONDS each (default 5), ROUNDS rounds
# (default 3) with the peers interleaved cell by cell.  Per cell: IOPS and
# the machine's CPU per I/O ((user+nice+system+irq+softirq) ticks from
# /proc/stat over the cell, in µs, other load included).  Prints one line
# per cell and a summary (best of the rounds, min-max).  Sets
# /sys/module/fuse/parameters/enable_uring to Y for its mounts and puts
# back what it found, whatever happens.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/targets.sh
source "$root/tests/lib/targets.sh"
build=${1:-$root/build}
ISERFUSE=$build/iserfuse
secs=${CELL_SECONDS:-5}
rounds=${ROUNDS:-3}
param=/sys/module/fuse/parameters/enable_uring
[[ -w $param ]] || { echo "no $param: this kernel has no FUSE over io_uring" >&2; exit 77; }
was=$(cat "$param")

work=$(mktemp -d /tmp/iserfuse-uring-bench.XXXXXX)
peers=(dev uring-perq uring-one)
cleanup() {
	set +e
	echo "$was" >"$param"
	for p in "${peers[@]}"; do
		mountpoint -q "$work/$p" && fusermount3 -u "$work/$p"
	done
	tgtd_stop "$work/tgt" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

tgtd_start "$work/tgt" 16M 0 >/dev/null
ctl=$(<"$work/tgt/ctl")
_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 2 --bstype null -b /dev/null/1G
url=$TGT_URL/2

echo Y >"$param"
for p in "${peers[@]}"; do
	mkdir -p "$work/$p"
	case $p in
	dev) "$ISERFUSE" -o cache_size=0,io_uring=off "$url" "$work/$p" ;;
	uring-perq) ISERFUSE_URING_THREADS=$(getconf _NPROCESSORS_CONF) "$ISERFUSE" -o cache_size=0,io_uring=on "$url" "$work/$p" ;;
	uring-one) ISERFUSE_URING_THREADS=1 "$ISERFUSE" -o cache_size=0,io_uring=on "$url" "$work/$p" ;;
	esac
	echo "# $p: fuse_path $(awk '$1 == "fuse_path" { print $2 }' "$work/$p/.stats")" >&2
done
echo "$was" >"$param" # only the mounts made above needed it

busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
hz=$(getconf CLK_TCK)
res=$work/cells.tsv
: >"$res"
for r in $(seq "$rounds"); do
	for rw in randread randwrite; do
		for qd in 1 32; do
			for p in "${peers[@]}"; do
				t0=$(busy)
				iops=$(timeout $((secs + 60)) fio --name=cell --filename="$work/$p/lun2" --size=1g --rw=$rw --bs=4k \
					--iodepth=$qd --ioengine=libaio --direct=1 --runtime="$secs" --time_based --randrepeat=1 \
					--norandommap --output-format=json 2>/dev/null |
					python3 -c 'import json,sys
t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]
print(round(j["read"]["iops"] + j["write"]["iops"]))')
				t1=$(busy)
				cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$iops" -v s="$secs" \
					'BEGIN { printf "%.1f", (n > 0 ? d / hz * 1e6 / (n * s) : 0) }')
				printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$rw" "$qd" "$p" "$iops" "$cpu" | tee -a "$res"
			done
		done
	done
done
echo "# best of $rounds (min-max IOPS; CPU µs per I/O of the best round)"
python3 - "$res" <<'PY'
import sys, collections
cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, rw, qd, p, iops, cpu = line.split()
    cells[(rw, int(qd), p)].append((int(iops), float(cpu)))
for (rw, qd, p), v in sorted(cells.items()):
    best = max(v)
    print("%-9s QD%-2d %-10s %7d IOPS (%d-%d)  %.1f us CPU/IO" % (rw, qd, p, best[0], min(x[0] for x in v),
          max(x[0] for x in v), best[1]))
PY
