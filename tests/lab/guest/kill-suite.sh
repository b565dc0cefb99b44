#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The iser-kill test, inside the lab guest (tests/lab/iser.sh boots it):
# tgtd (iSER) is killed with SIGKILL during a verified write workload on
# a LUN mounted over iSER and, 2 s later, started again with the same LUN;
# KILLS times (default 10).  Every fio pass (--verify=crc32c) must end
# with 0 verify errors and 0 I/O errors, the session must be reinstated
# once per kill over the same memory registration, and the downtime of
# each reconnect is printed.  The daemon runs in the foreground, so its
# log ends up in OUT_DIR/kill-daemon.log.
#   kill-suite.sh BUILD_DIR OUT_DIR [KILLS]
# ISER_KILLS (default 10) and ISER_KILL_OPTS (more iserfuse options, e.g. -d)
# reach the guest through tests/lab/iser.sh.
set -uo pipefail
BUILD=$1
OUT=${2:-/lab}
KILLS=${3:-${ISER_KILLS:-10}}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../lib/report.sh
source "$HERE/../../lib/report.sh"
IQN=iqn.2024-01.lab.rdma:tgt-iser
NAME=iqn.2024-01.lab.rdma:iserfuse
URL="iscsi://192.0.2.2/$IQN/1"
MNT=$(mktemp -d /tmp/iser-kill.XXXXXX)
LOG=$OUT/kill-daemon.log
export TGT_INITIATORS=$NAME

bash "$HERE/rxe-up.sh" > "$OUT/rxe.log" 2>&1 || { fail "rdma_rxe up"; note "$OUT/rxe.log"; summary; exit 1; }
bash "$HERE/tgt-up.sh" 1G > "$OUT/tgt.log" 2>&1 || { fail "tgtd up"; note "$OUT/tgt.log"; summary; exit 1; }
modprobe fuse
# The first tgtd takes immediate data and offers InitialR2T=No (we keep
# Yes over iSER); the restarted ones have tgt's iSER defaults (no immediate
# data): the re-issued writes follow the new session's parameters.
tid=$(tgtadm --lld iser --op show --mode target | awk -v q="$IQN" '$0 ~ q {sub(":","",$2); print $2; exit}')
tgtadm --lld iser --op update --mode target --tid "$tid" --name ImmediateData --value Yes
tgtadm --lld iser --op update --mode target --tid "$tid" --name InitialR2T --value No

# each log line gets the time it was written (s since the epoch, as the kill lines below)
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
"$BUILD/iserfuse" -f -o "initiator_name=$NAME,transport=iser,replacement_timeout=120" ${ISER_KILL_OPTS:-} "$URL" "$MNT" \
	> >(stamp > "$LOG") 2>&1 &
daemon=$!
for _ in $(seq 300); do [ -e "$MNT/lun1" ] && break; kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
if [ ! -e "$MNT/lun1" ]; then
	fail "mounted over iSER"; note "$LOG"; summary; exit 1
fi
pass "mounted over iSER"

reinstated() { grep -c 'reinstated after' "$LOG"; }
fio_pass() { # NAME: one write+verify pass over 16 MiB at 64 MiB
	timeout 600 fio --name="$1" --filename="$MNT/lun1" --offset=64M --size=16M --bsrange=4k-64k --rw=randwrite \
		--ioengine=libaio --direct=1 --iodepth=16 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--verify_state_save=0 --output="$OUT/kill-$1.fio" > /dev/null 2>&1
}

# fio passes in the background until the kills are over
(
	passes=0 bad=0
	while [ ! -e /tmp/killer.done ] || [ $passes = 0 ]; do
		passes=$((passes + 1))
		fio_pass "pass$passes" || bad=$((bad + 1))
		[ $passes -lt 100 ] || break
	done
	echo "$passes $bad" > /tmp/fio.result
) &
worker=$!

ms() { date +%s%3N; }
: > /tmp/killer.err
for k in $(seq "$KILLS"); do
	sleep 2
	pid=$(cat /run/tgtd.pid)
	if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != tgtd ]; then
		echo "no tgtd to kill before kill $k" >> /tmp/killer.err
		break
	fi
	before=$(reinstated)
	t0=$(ms)
	echo "$EPOCHREALTIME # kill $k" >> "$OUT/kill-times.log"
	kill -9 "$pid"
	sleep 2
	cp /var/tmp/tgtd.log "$OUT/tgtd-$k.log" # before tgt-up.sh starts a new one
	bash "$HERE/tgt-up.sh" 1G >> "$OUT/tgt-restart.log" 2>&1 || echo "tgtd restart $k failed" >> /tmp/killer.err
	t1=$(ms)
	echo "$EPOCHREALTIME # tgtd $k configured" >> "$OUT/kill-times.log"
	for _ in $(seq 600); do [ "$(reinstated)" -gt "$before" ] && break; sleep 0.1; done
	[ "$(reinstated)" -gt "$before" ] || echo "no reinstatement within 60 s after kill $k" >> /tmp/killer.err
	echo "# kill $k: tgtd restarted and both its targets configured $((t1 - t0)) ms after the SIGKILL"
done
touch /tmp/killer.done
wait "$worker"
read -r passes bad < /tmp/fio.result || { passes=0; bad=1; }
for f in "$OUT"/kill-pass*.fio; do grep -q 'err= *0' "$f" || note "$f"; done

check_eq "$passes fio passes across $KILLS tgtd kills over iSER: 0 verify or I/O errors" "$bad" 0
check "every kill was followed by a reinstatement" test ! -s /tmp/killer.err
[ -s /tmp/killer.err ] && note /tmp/killer.err
# a reconnect of the target's own (it dropped the connection) is allowed, but shown
n=$(reinstated)
check "reinstatements logged: $n for $KILLS kills" test "$n" -ge "$KILLS"
[ "$n" -le "$KILLS" ] || grep 'lost' "$LOG" | sed 's/^/#   /'
check_eq ".stats reconnects" "$(awk '$1=="reconnects"{print $2}' "$MNT/.stats")" "$n"
check_eq ".stats mr_registrations (one registration across the reconnects)" \
	"$(awk '$1=="mr_registrations"{print $2}' "$MNT/.stats")" 1
echo "# downtime per reconnect (ms, loss to full feature phase): $(sed -n 's/.*reinstated after .*: down \([0-9]*\) ms.*/\1/p' "$LOG" | tr '\n' ' ')"
# from each SIGKILL to the daemon noticing the loss (both logs carry the same clock)
echo "# loss noticed after each SIGKILL (ms): $(awk '/# kill/ { k[++n] = $1 } / lost: / && FILENAME ~ /daemon/ { l[++m] = $1 }
	END { j = 1; for (i = 1; i <= n; i++) { while (j <= m && l[j] < k[i]) j++; if (j <= m) printf "%d ", (l[j] - k[i]) * 1000 } }' \
	"$OUT/kill-times.log" "$LOG")"
[ "$bad" = 0 ] || grep -v '^$' "$LOG" | tail -n 60 | sed 's/^/#   /'

fusermount3 -u "$MNT"
for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$daemon" 2>/dev/null; then rc="still running 10 s after the unmount"; kill -9 "$daemon"
elif wait "$daemon"; then rc=0; else rc=$?; fi
check_eq "the daemon exits 0 after the unmount" "$rc" 0
summary
