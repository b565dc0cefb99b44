#!/bin/bash
# SPDX-License-Identifier: MIT
#
# iserfuse --restart under load:
#
#   handover.sh ISERFUSE [RESTARTS]
#
# fio (randrw 4k-1M, QD32, --verify=crc32c) in a loop while `iserfuse
# --restart MOUNTPOINT` replaces the worker RESTARTS times (default 3):
# each returns 0 once the new worker serves, the old one exited 0, fio
# sees no error; SIGUSR1 to the supervisor does the same.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

if [[ $# -lt 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE [RESTARTS]" >&2
	exit 2
fi
iserfuse=$1
restarts=${2:-3}
need_root "tgtd and FUSE"
need_tools tgtd tgtadm fusermount3 fio python3 pgrep

restart_mounted restart-handover -o cache_size=32M -o writeback
pass "mounted"

(
	passes=0
	while [[ ! -e $work/restarter.done ]] || ((passes == 0)); do
		passes=$((passes + 1))
		fio_pass "pass$passes" "$work/mnt/lun1" 48M 192M || echo "pass$passes: fio exit $?" >>"$work/fio.bad"
		((passes < 200)) || break
	done
	echo "$passes" >"$work/fio.passes"
) &
bg=$!

sleep 1
for ((k = 1; k <= restarts; k++)); do
	old=$(worker_pid)
	if timeout 60 "$iserfuse" --restart "$work/mnt" >"$work/restart.out" 2>&1; then
		new=$(worker_pid)
		[[ -n $new && $new != "$old" ]] || echo "restart $k: the worker is still $old" >>"$work/restarter.err"
	else
		echo "restart $k: iserfuse --restart failed: $(cat "$work/restart.out")" >>"$work/restarter.err"
	fi
	sleep 2
done
old=$(worker_pid)
kill -USR1 "$daemon"
for _ in $(seq 200); do
	new=$(worker_pid)
	[[ -n $new && $new != "$old" ]] && (($(restarts_logged) > restarts)) && break
	sleep 0.05
done
check "SIGUSR1 to the supervisor: a new worker" test "$(restarts_logged)" -gt "$restarts"
# another user connecting to the supervisor's restart socket directly is refused
devno=$(awk -v m="$work/mnt" '$5 == m { print $3 }' /proc/self/mountinfo | tail -n 1)
before=$(worker_pid)
answer=$(python3 - "$devno" <<'PY'
import os, socket, sys
os.setgid(65534)
os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0iserfuse-supervisor/" + sys.argv[1])
print(s.recv(256).decode().strip())
PY
) || true
check_eq "another user's restart request: refused" "$answer" "failed: permission denied (root or the mount's owner only)"
sleep 0.5
check_eq "... the worker is the same" "$(worker_pid)" "$before"
sleep 2
touch "$work/restarter.done"
wait "$bg" || true
bg=''
passes=$(cat "$work/fio.passes" 2>/dev/null || echo 0)
names=()
for ((i = 1; i <= passes; i++)); do names+=("$work/pass$i"); done
check "$restarts iserfuse --restart: each 0, a new worker each time" test ! -s "$work/restarter.err"
[[ -s $work/restarter.err ]] && note "$work/restarter.err"
check "$passes fio passes across the restarts: every one exits 0" test ! -s "$work/fio.bad"
[[ -s $work/fio.bad ]] && note "$work/fio.bad"
check_eq "no I/O or verify error in fio's output" "$(fio_errors "${names[@]}")" 0
check_eq "the old workers ended as asked (no crash)" "$(grep -c 'restart asked for' "$work/daemon.log" || true)" "$((restarts + 1))"
rc=0
"$iserfuse" --restart "$work/nonexistent" >"$work/out" 2>&1 || rc=$?
check_eq "--restart on a directory that is no mount: exit 1, one line" "$rc $(wc -l <"$work/out")" "1 1"
unmount_check
summary
