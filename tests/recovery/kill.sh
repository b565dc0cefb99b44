#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Target crashes during a verified write workload:
#
#   kill.sh ISERFUSE [KILLS]
#
# fio (--verify=crc32c, write then read back) runs in a loop on the mounted
# LUN while tgtd is killed with SIGKILL and, 2 s later, started again with
# the same port and LUN; KILLS times (default 10).  Every fio pass must end
# with 0 verify errors and 0 I/O errors, the session must be reinstated
# once per kill, and the downtime of each reconnect (loss to full feature
# phase, from the daemon's log) is printed.
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
if [[ $(id -u) -ne 0 ]] || ! command -v fio >/dev/null; then
	echo "# SKIP: needs root (tgtd, FUSE) and fio"
	exit 77
fi

tgtd_mounted kill -o replacement_timeout=60
pass "mounted"

# fio passes in the background until the kills are over.
(
	passes=0
	bad=0
	while [[ ! -e $work/killer.done ]] || ((passes == 0)); do
		passes=$((passes + 1))
		fio_verify "pass$passes" "$work/mnt/lun1" 16M || bad=$((bad + 1))
		((passes < 200)) || break
	done
	echo "$passes $bad" >"$work/fio.result"
) &
worker=$!

# The kills (in this shell, whose children the tgtds are): SIGKILL, 2 s
# down, restart, wait for the reinstatement, repeat.
ms() { date +%s%3N; }
for ((k = 1; k <= kills; k++)); do
	sleep 1.5
	t0=$(ms)
	tgtd_kill "$work/tgtd"
	sleep 2
	tgtd_restart "$work/tgtd" || echo "restart $k failed" >>"$work/killer.err"
	t1=$(ms)
	wait_reinstated "$k" 30 || echo "no reinstatement after kill $k" >>"$work/killer.err"
	echo "# kill $k: target down $((t1 - t0)) ms (SIGKILL to LUN configured again), session back $(($(ms) - t1)) ms later (0.1 s polling)"
done
touch "$work/killer.done"
wait "$worker" || true
worker=''
read -r passes bad <"$work/fio.result" || { passes=0; bad=1; }
for f in "$work"/pass*.fio; do
	grep -q 'err= *0' "$f" || note "$f"
done
# One more pass with the target up all along.
passes=$((passes + 1))
fio_verify "pass$passes" "$work/mnt/lun1" 16M || bad=$((bad + 1))

check_eq "$passes fio passes across $kills target kills: 0 verify or I/O errors" "$bad" 0
errs=$(cat "$work"/pass*.fio | grep -c 'verify: bad\|Input/output error' || true)
check_eq "no verify or I/O error in fio's output" "$errs" 0
check "every kill was followed by a reinstatement" test ! -s "$work/killer.err"
check_eq "reinstatements logged" "$(reinstated_count)" "$kills"
if [[ -s $work/killer.err ]]; then note "$work/killer.err"; fi
down=$(downtimes | sort -n | tr '\n' ' ')
echo "# downtime per reconnect (ms, loss to full feature phase): $down"
if ((bad)); then note "$work/daemon.log"; fi
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
