#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Failover between two paths under fio --verify:
#
#   failover.sh ISERFUSE link|blackhole
#
# tgtd listens on both target addresses of common.sh's two links; the
# daemon mounts through link A (the URL's portal, path 0) with
# -o portal= for link B (with accept_unlisted_portals: tgtd's SendTargets
# names only the portal asked and its designators are not globally
# unique), and once .stats shows paths_up 2, fio writes
# 4 KiB blocks at random at iodepth 32 (libaio, direct) and verifies them
# (crc32c), pass after pass, while the links fail in turn, one at a time,
# 10 outages in all (A, B, A, ...):
#   link       the gateway's end of the link goes down for 1.5 s: netlink
#              tells the daemon at once (default noop_interval/noop_timeout);
#   blackhole  the links stay up and a blackhole route in the target's
#              namespace drops every reply for 5 s (default options too):
#              only the stall of the path's commands tells, and the ping
#              the multipath layer sends at once then goes unanswered.
# Checked: one link down at a time (paths_up back to 2 within 15 s of each
# outage's end, before the next), 0 verify errors and 0 I/O errors, failovers > 0, both paths up
# at the end; per outage, at the default log level, exactly two lines:
# the path going down (with the commands moved) and the path back, and
# the moved counts of the down lines add up to .stats' failovers.  For
# link, no completion waited 1.5 s (the outage's length); for blackhole,
# none waited more than 2 s.  The longest completion latency per outage
# and overall is printed (fio's per-50-ms maximum latency log).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 2 "ISERFUSE link|blackhole" "$@"
need_exe "$1"
iserfuse=$1
mode=$2
if [[ $mode != link && $mode != blackhole ]]; then
	echo "usage: $0 ISERFUSE link|blackhole" >&2
	exit 2
fi
need_root "needs root (network namespaces, tgtd, a mount)"
need_tools fio ip nsenter tgtd tgtadm python3 fusermount3

outages=10
down_s=1.5
[[ $mode == link ]] || down_s=5

mp_init "failover-$mode"
if ! mp_net; then
	echo "# SKIP: cannot make network namespaces and veth pairs here"
	exit 77
fi
pass "namespaces $ns_gw and $ns_tg joined by links A ($veth_ga) and B ($veth_gb)"

if ! mp_tgtd "$work/disk.img" 64M "$MP_A:3260" "$MP_B:3260"; then
	fail "tgtd on $MP_A:3260 and $MP_B:3260"
	note "$work"/tgtd.*.log
	summary
	exit 1
fi
pass "tgtd on $MP_A:3260 and $MP_B:3260"
for a in "$MP_A" "$MP_B"; do
	check "the gateway namespace reaches $a:3260" \
		nsenter --net="/run/netns/$ns_gw" timeout 5 bash -c "exec 3<>/dev/tcp/$a/3260"
done

if ! mp_mount "iscsi://$MP_A:3260/$TGT_IQN/1" -o "portal=$MP_B:3260,accept_unlisted_portals,login_timeout=5"; then
	fail "mounted through link A"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mounted through link A"
check "both paths up within 20 s (paths_up 2)" mp_wait_stat paths_up 2 20

# fio passes until the outages are over (at least one).
(
	n=0
	while [[ ! -e $work/outages.done ]] || ((n == 0)); do
		n=$((n + 1))
		mp_fio "pass$n" "$work/mnt/lun1" 32M || true
		echo "pass$n" >>"$work/passes"
		((n < 200)) || break
	done
) &
worker=$!

sleep 2
: >"$work/outages"
late=()
for ((k = 1; k <= outages; k++)); do
	link=A
	((k % 2)) || link=B
	wc -l <"$work/daemon.log" >"$work/lines.$k"
	t0=$(mp_now_ms)
	if [[ $mode == link ]]; then mp_link "$link" down; else mp_blackhole "$link" on; fi
	sleep "$down_s"
	if [[ $mode == link ]]; then mp_link "$link" up; else mp_blackhole "$link" off; fi
	t1=$(mp_now_ms)
	echo "$k $link $t0 $t1" >>"$work/outages"
	# one link down at a time: the path is back before the next outage
	if ! mp_wait_stat paths_up 2 15; then
		late+=("$k")
		echo "# outage $k: paths_up $(mp_stat paths_up) 15 s after link $link came back"
	fi
	sleep 0.5
done
wc -l <"$work/daemon.log" >"$work/lines.$k"
touch "$work/outages.done"
check_eq "one link down at a time: paths_up back to 2 within 15 s of each outage's end (outages late: ${late[*]:-none})" \
	"${#late[@]}" 0
wait "$worker" || true
worker=''

verify=0
ioerr=0
passes=0
while read -r p; do
	passes=$((passes + 1))
	read -r v e <<<"$(mp_fio_errors "$p")"
	verify=$((verify + v))
	ioerr=$((ioerr + e))
	((v + e == 0)) || note "$work/$p.err"
done <"$work/passes"
check_eq "$passes fio passes across $outages outages ($mode): 0 verify errors" "$verify" 0
check_eq "$passes fio passes across $outages outages ($mode): 0 I/O errors" "$ioerr" 0

mapfile -t names <"$work/passes"
mp_stalls "$work/outages" "${names[@]}" >"$work/stalls"
sed 's/^outage/# outage/' "$work/stalls" | grep -v '^max\|^samples'
stall=$(awk '$1 == "max" { print $2 }' "$work/stalls")
echo "# longest I/O stall ($mode, outages of $down_s s): $stall ms"
check "fio logged completion latencies to judge the stalls by ($(awk '$1 == "samples" { print $2 }' "$work/stalls") samples)" \
	test "$(awk '$1 == "samples" { print $2 }' "$work/stalls")" -gt 0
# the daemon's own account, at the default log level: one line per path going down, one per path back
sed 's/^/# daemon: /' "$work/daemon.log"

check "failovers > 0 ($(mp_stat failovers))" test "$(mp_stat failovers || echo 0)" -gt 0
moved=0
for ((k = 1; k <= outages; k++)); do
	a=$MP_A
	((k % 2)) || a=$MP_B
	from=$(<"$work/lines.$k")
	to=$(<"$work/lines.$((k + 1))")
	sed -n "$((from + 1)),${to}p" "$work/daemon.log" >"$work/lines.out"
	n=$(grep -c "path $a:3260 down (.*): [0-9]* commands moved to other paths" "$work/lines.out" || true)
	u=$(grep -c "path $a:3260 up again after [0-9]* ms" "$work/lines.out" || true)
	check "outage $k: two lines, its path $a:3260 going down ($n) and back ($u), $((to - from)) in all" \
		test "$((to - from))/$n/$u" = 2/1/1
	m=$(sed -n "s/^.*path $a:3260 down (.*): \([0-9]*\) commands moved to other paths.*$/\1/p" "$work/lines.out" | head -n 1)
	moved=$((moved + ${m:-0}))
done
check_eq "the moved counts of the down lines add up to .stats' failovers" "$moved" "$(mp_stat failovers)"
check "both paths up at the end (paths_up 2)" mp_wait_stat paths_up 2 15
for i in 0 1; do
	check "path$i up: $(mp_path_line $i)" bash -c "[[ '$(mp_path_line $i)' == path$i\ *\ up\ * ]]"
done
if [[ $mode == link ]]; then
	check "no completion waited as long as an outage (longest $stall ms < 1500 ms)" test "${stall%.*}" -lt 1500
else
	check "no completion waited more than 2 s on a blackholed path (longest $stall ms <= 2000 ms)" \
		test "${stall%.*}" -le 2000
fi
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
