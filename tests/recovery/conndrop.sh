#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The target drops the connection on purpose:
#
#   conndrop.sh ISERFUSE
#
# During a verified fio write workload, tgtd is told to drop our connection
# (tgtadm --op delete --mode conn) three times.  Each time the session must
# be reinstated (tgtd shows a new session for our initiator) and fio must
# end with 0 verify errors and 0 I/O errors.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
if [[ $(id -u) -ne 0 ]] || ! command -v fio >/dev/null; then
	echo "# SKIP: needs root (tgtd, FUSE) and fio"
	exit 77
fi

tgtd_mounted conndrop -o replacement_timeout=30
ctl=$(<"$work/tgtd/ctl")
pass "mounted"

session_id() {
	timeout 10 tgtadm -C "$ctl" --lld iscsi --op show --mode conn --tid 1 | sed -n 's/^Session: //p' | head -n 1
}

(
	passes=0
	bad=0
	while [[ ! -e $work/drops.done ]] || ((passes == 0)); do
		passes=$((passes + 1))
		fio_verify "pass$passes" "$work/mnt/lun1" 8M || bad=$((bad + 1))
		((passes < 100)) || break
	done
	echo "$passes $bad" >"$work/fio.result"
) &
worker=$!

sids=()
for ((k = 1; k <= 3; k++)); do
	sleep 1
	sid=$(session_id)
	sids+=("$sid")
	timeout 10 tgtadm -C "$ctl" --lld iscsi --op delete --mode conn --tid 1 --sid "$sid" --cid 0 ||
		echo "delete $k failed" >>"$work/drops.err"
	wait_reinstated "$k" 30 || echo "no reinstatement after drop $k" >>"$work/drops.err"
done
touch "$work/drops.done"
wait "$worker" || true
worker=''
read -r passes bad <"$work/fio.result" || { passes=0; bad=1; }
check_eq "$passes fio passes across 3 dropped connections: 0 verify or I/O errors" "$bad" 0
check "each drop was followed by a reinstatement" test ! -s "$work/drops.err"
if [[ -s $work/drops.err ]]; then note "$work/drops.err"; fi
sid=$(session_id)
if [[ -n $sid && " ${sids[*]} " != *" $sid "* ]]; then
	pass "tgtd shows a new session ($sid after ${sids[*]})"
else
	fail "tgtd shows a new session (now '$sid', before ${sids[*]})"
fi
echo "# downtime (ms): $(downtimes | tr '\n' ' ')"
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
