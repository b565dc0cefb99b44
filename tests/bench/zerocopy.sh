#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Before / after of a change to the gateway's write path (not part of
# `meson test`; needs root, fio): two daemons, BEFORE and AFTER, each
# mounting LUN 1 of one null target (tests/bench/nulltarget) with
# cache_size=0, then fio random writes through each mount, libaio direct,
# 4 KiB and 1 MiB at QD 1 and 32, CELL_SECONDS each (default 4), ROUNDS
# rounds (default 3) with the two peers interleaved cell by cell.
#
#   tests/bench/zerocopy.sh BEFORE_ISERFUSE AFTER_ISERFUSE NULLTARGET
#
# Per cell and peer: the best IOPS over the rounds and the range, the
# lowest machine CPU per I/O ((user+nice+system+irq+softirq) of /proc/stat
# over the cell / I/Os: everything on the machine, other load included)
# and the lowest daemon CPU per I/O (its utime+stime); the .stats
# payload_bytes_copied each daemon ended with.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/targets.sh
source "$here/../lib/targets.sh"

(($# == 3)) || {
	echo "usage: $0 BEFORE_ISERFUSE AFTER_ISERFUSE NULLTARGET" >&2
	exit 2
}
bin=([0]="$1" [1]="$2")
nulltarget=$3
secs=${CELL_SECONDS:-4}
rounds=${ROUNDS:-3}
name=([0]=before [1]=after)
work=$(mktemp -d /tmp/iserfuse-zcbench.XXXXXX)
nt_pid=''
dpid=()
trap 'for m in "$work"/m0 "$work"/m1; do fusermount3 -u "$m" 2>/dev/null || true; done
	[[ -n $nt_pid ]] && kill "$nt_pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

port=$(free_port)
"$nulltarget" "$port" iqn.2026-11.org.example:null >"$work/nt.log" 2>&1 &
nt_pid=$!
_targets_wait_listen "$nt_pid" "$port" 5 || {
	echo "nulltarget did not start" >&2
	exit 1
}
for i in 0 1; do
	mkdir -p "$work/m$i"
	"${bin[$i]}" -o cache_size=0,initiator_name=iqn.2026-11.org.example:zc$i \
		"iscsi://127.0.0.1:$port/iqn.2026-11.org.example:null/1" "$work/m$i" >"$work/mount$i.log" 2>&1
	dpid[i]=$(pgrep -f -- "$work/m$i\$" | head -1)
done

ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
hz=$(getconf CLK_TCK)

# The daemon of peer $1: utime + stime, clock ticks.
dticks() { awk '{ print $14 + $15 }' "/proc/${dpid[$1]}/stat"; }

# cell PEER BS QD -> "iops cpu_us_per_io daemon_cpu_us_per_io"
cell() {
	local t0 t1 d0 d1 out ios
	d0=$(dticks "$1")
	t0=$(ticks)
	out=$(fio --name=w --filename="$work/m$1/lun1" --rw=randwrite --bs="$2" --iodepth="$3" --ioengine=libaio \
		--direct=1 --size=64G --time_based --runtime="$secs" --norandommap --randrepeat=0 \
		--output-format=json 2>/dev/null)
	t1=$(ticks)
	d1=$(dticks "$1")
	ios=$(jq '.jobs[0].write.total_ios' <<<"$out")
	jq -r --argjson ios "$ios" --argjson dt "$((t1 - t0))" --argjson dd "$((d1 - d0))" --argjson hz "$hz" \
		'def per(t): if $ios > 0 then (t / $hz * 1e6 / $ios * 10 | floor) / 10 else 0 end;
		"\(.jobs[0].write.iops | floor) \(per($dt)) \(per($dd))"' <<<"$out"
}

declare -A res
for ((r = 1; r <= rounds; r++)); do
	for c in "4k 1" "4k 32" "1m 1" "1m 32"; do
		read -r bs qd <<<"$c"
		for i in 0 1; do
			res["$bs $qd $i"]+="$(cell "$i" "$bs" "$qd");"
		done
	done
done

printf '%-12s %-44s %-44s\n' "randwrite" "${name[0]}: IOPS best (range), CPU/IO, daemon" \
	"${name[1]}: IOPS best (range), CPU/IO, daemon"
for c in "4k 1" "4k 32" "1m 1" "1m 32"; do
	# shellcheck disable=SC2086 # two words
	line=$(printf '%-4s QD%-5s' ${c})
	for i in 0 1; do
		line+=$(tr ';' '\n' <<<"${res["$c $i"]}" | awk 'NF == 3 {
			if (n == 0 || $1 > hi) hi = $1; if (n == 0 || $1 < lo) lo = $1
			if (n == 0 || $2 < cpu) cpu = $2; if (n == 0 || $3 < dc) dc = $3; n++ }
			END { printf " %-44s", sprintf("%d (%d-%d), %.1f us, %.1f us", hi, lo, hi, cpu, dc) }')
	done
	echo "$line"
done
for i in 0 1; do
	echo "${name[$i]}: payload_bytes_copied $(awk '$1 == "payload_bytes_copied" { print $2 }' "$work/m$i/.stats"), bytes_written $(awk '$1 == "bytes_written" { print $2 }' "$work/m$i/.stats")"
done
