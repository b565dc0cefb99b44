#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The mount outlives its worker:
#
#   kill.sh ISERFUSE [KILLS]
#
# fio (randrw 4k-1M, QD32, --verify=crc32c) runs in a loop on the first
# half of the mounted LUN, and a steady fio load (randrw 4k-1M, QD32) on
# the second half, while the worker is killed with SIGKILL KILLS times
# (default 10), 3 s apart.  Every pass must end with 0 I/O and 0 verify errors, a new worker
# must serve after each kill, the mount must stay; the longest completion
# latency (the stall across a kill) is printed.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

if [[ $# -lt 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE [KILLS]" >&2
	exit 2
fi
iserfuse=$1
kills=${2:-10}
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 fio python3 pgrep

restart_mounted restart-kill
pass "mounted"
check "a worker runs under the supervisor" test -n "$(worker_pid)"

# A steady load beside the verified passes (the LUN's second half), so that
# every kill finds requests read and not answered; its errors count too.
fio --name=load --filename="$work/mnt/lun1" --offset=32M --size=32M --bsrange=4k-1M --rw=randrw \
	--allow_file_create=0 --ioengine=libaio --direct=1 --iodepth=32 --time_based --runtime=$((kills * 3 + 2)) \
	--output-format=json --output="$work/load.json" >/dev/null 2>"$work/load.err" &
load=$!
(
	passes=0
	while [[ ! -e $work/killer.done ]] || ((passes == 0)); do
		passes=$((passes + 1))
		fio_pass "pass$passes" "$work/mnt/lun1" 32M 128M || echo "pass$passes: fio exit $?" >>"$work/fio.bad"
		((passes < 200)) || break
	done
	echo "$passes" >"$work/fio.passes"
) &
bg=$!

sleep 1
kill_workers "$kills"
touch "$work/killer.done"
wait "$bg" || true
bg=''
lrc=0
wait "$load" || lrc=$?
check_eq "the steady load: fio exits 0" "$lrc" 0
passes=$(cat "$work/fio.passes" 2>/dev/null || echo 0)
names=()
for ((i = 1; i <= passes; i++)); do names+=("$work/pass$i"); done

check "every kill was followed by a new worker" test ! -s "$work/killer.err"
[[ -s $work/killer.err ]] && note "$work/killer.err"
check "$passes fio passes across $kills worker kills: every one exits 0" test ! -s "$work/fio.bad"
[[ -s $work/fio.bad ]] && note "$work/fio.bad"
check_eq "no I/O or verify error in fio's output" "$(fio_errors "${names[@]}" "$work/load")" 0
check_eq "restarts logged" "$(restarts_logged)" "$kills"
jsons=("$work/load.json")
for n in "${names[@]}"; do jsons+=("$n.json"); done
echo "# longest stall (fio's longest completion latency over $passes passes): $(fio_max_lat_ms "${jsons[@]}") ms"
sed -n 's/.*serves the mount: .*; \([0-9]*\) ms without a worker; \([0-9]*\) requests resent.*/# without a worker \1 ms, \2 requests resent/p' "$work/daemon.log"
resent=$(sed -n 's/^requests_resent //p' "$work/mnt/.stats")
echo "# requests resent over the $kills kills: $resent"
check "the kernel resent requests a dead worker had read (.stats requests_resent $resent)" test "${resent:-0}" -gt 0
check "the mount is still there" is_mounted "$work/mnt"
check_eq ".stats counts the restarts" "$(sed -n 's/^worker_restarts //p' "$work/mnt/.stats")" "$kills"
check "the supervisor still runs" kill -0 "$daemon"
unmount_check
summary
