#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Heap allocations per I/O of the iserfuse daemon (not part of `meson
# test`; needs root, fio and tgtd).
#
#   tests/bench/allocs.sh [N]
#
# A private tgtd (LUN 1: a 256 MiB file, 512-byte blocks); the daemon runs
# under BUILD_DIR/tests/bench/libmalloc_count.so (tests/bench/malloc_count.c),
# which counts malloc, calloc and realloc calls.  For each of cache on
# (default options) and cache_size=0, and each of 4 KiB randread and
# randwrite (fio, libaio, direct=1, iodepth=32, N I/Os, default 20000) and
# buffered randread (psync, 32 jobs: O_DIRECT reads skip an empty block
# cache, buffered ones go through it): SIGUSR2 before and after the fio
# run, and the difference divided by the I/Os fio did is printed, with the
# daemon's CPU time (utime + stime from /proc, clock ticks) per I/O over
# the same run.  Environment: BUILD_DIR (default build/),
# ISERFUSE (default BUILD_DIR/iserfuse).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/targets.sh
source "$root/tests/lib/targets.sh"

N=${1:-20000}
BUILD_DIR=${BUILD_DIR:-$root/build}
ISERFUSE=${ISERFUSE:-$BUILD_DIR/iserfuse}
SO=$BUILD_DIR/tests/bench/libmalloc_count.so
[[ -x $ISERFUSE && -r $SO ]] || {
	echo "allocs.sh: build first (ninja -C $BUILD_DIR)" >&2
	exit 1
}

work=$(mktemp -d /tmp/iserfuse-allocs.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	set +e
	mountpoint -q "$mnt" && fusermount3 -u "$mnt"
	tgtd_stop "$work/tgt"
	rm -rf "$work"
}
trap cleanup EXIT

tgtd_start "$work/tgt" 256M 0 >/dev/null

# The counts (malloc calloc realloc total) of the last line the daemon (pid $1) wrote.
last_counts() { awk -v p="$1" '$1 == p { l = $2 " " $3 " " $4 " " $5 } END { print l }' "$work/counts"; }

cell() { # label rw|randread-buffered [iserfuse options...]
	local label=$1 rw=$2 io
	shift 2
	if [[ $rw == randread-buffered ]]; then
		io=(--rw=randread --ioengine=psync --direct=0 --numjobs=32 --group_reporting)
	else
		io=(--rw="$rw" --ioengine=libaio --direct=1 --iodepth=32)
	fi
	: >"$work/counts"
	MALLOC_COUNT_FILE=$work/counts LD_PRELOAD=$SO "$ISERFUSE" -f "$@" "$TGT_URL/1" "$mnt" 2>"$work/daemon.log" &
	local pid=$!
	for _ in $(seq 100); do
		[[ -e $mnt/lun1 ]] && break
		sleep 0.1
	done
	[[ -e $mnt/lun1 ]] || {
		echo "allocs.sh: mount failed: $(tail -n 3 "$work/daemon.log")" >&2
		exit 1
	}
	# Warm up (first-use allocations of threads, rings, libfuse buffers).
	fio --name=warm --filename="$mnt/lun1" "${io[@]}" --bs=4k --number_ios=200 --size=256M --randrepeat=0 \
		--output=/dev/null
	kill -USR2 "$pid"
	sleep 0.2
	local a b ios
	a=$(last_counts "$pid")
	local t0 t1
	t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	local per=$N
	[[ $rw == randread-buffered ]] && per=$((N / 32))
	fio --name=cell --filename="$mnt/lun1" "${io[@]}" --bs=4k --number_ios="$per" --size=256M --randrepeat=0 \
		--output-format=json --output="$work/fio.json"
	kill -USR2 "$pid"
	sleep 0.2
	b=$(last_counts "$pid")
	t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	ios=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(j["read"]["total_ios"]+j["write"]["total_ios"])' "$work/fio.json")
	fusermount3 -u "$mnt"
	wait "$pid" || true
	awk -v l="$label" -v rw="$rw" -v a="$a" -v b="$b" -v n="$ios" -v cpu="$(((t1 - t0) * 1000000 / $(getconf CLK_TCK)))" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%-14s %-18s %8d I/Os %9d allocations %7.3f per I/O (malloc %.3f, calloc %.3f, realloc %.3f), CPU %.1f us per I/O\n",
			l, rw, n, y[4] - x[4], (y[4] - x[4]) / n, (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n, cpu / n
	}'
}

for rw in randread randwrite randread-buffered; do
	cell "cache on" "$rw"
	cell "cache_size=0" "$rw" -o cache_size=0
done
