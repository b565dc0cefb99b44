#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Link loss between the gateway and the target:
#
#   linkdown.sh ISERFUSE
#
# Makes two network namespaces joined by a veth pair (192.0.2.0/24,
# TEST-NET-1, existing only inside them): tgtd listens on 192.0.2.1 in one,
# iserfuse runs in the other (nsenter --net only: its mount is visible
# here, where fio runs).  Mid-workload the gateway's end of the link goes
# down for 5 s and comes back up, twice.  fio (--verify=crc32c) must end
# with 0 verify errors and 0 I/O errors, and each outage is detected by the
# NOP-Out pings (noop_interval=1, noop_timeout=2): the session is reinstated
# exactly once per outage, twice in all.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
if [[ $(id -u) -ne 0 ]] || ! command -v fio >/dev/null || ! command -v ip >/dev/null ||
	! command -v nsenter >/dev/null; then
	echo "# SKIP: needs root, fio, ip (iproute2) and nsenter"
	exit 77
fi

suite_scratch linkdown
suite_drop=('*.img' '*.verify.state' pattern got)
tag=$$
ns_gw=iserfuse-gw-$tag
ns_tg=iserfuse-tg-$tag
veth_gw=ifgw$tag
veth_tg=iftg$tag
daemon=''
worker=''
tgt_pid=''
ctl=''
suite_teardown() {
	[[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
	force_unmount "$work/mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	if [[ -n $tgt_pid ]] && _targets_alive "$tgt_pid"; then
		kill -KILL "$tgt_pid" 2>/dev/null
		wait "$tgt_pid" 2>/dev/null
	fi
	[[ -n $ctl ]] && rm -f "$TGTD_SOCKET_DIR/socket.$ctl" "$TGTD_SOCKET_DIR/socket.$ctl.lock"
	ip netns del "$ns_gw" 2>/dev/null
	ip netns del "$ns_tg" 2>/dev/null
	return 0
}

# ---------------------------------------------------------------- network
if ! {
	ip netns add "$ns_gw" && ip netns add "$ns_tg" &&
		ip link add "$veth_gw" netns "$ns_gw" type veth peer name "$veth_tg" netns "$ns_tg" &&
		ip -n "$ns_gw" addr add 192.0.2.2/24 dev "$veth_gw" &&
		ip -n "$ns_tg" addr add 192.0.2.1/24 dev "$veth_tg" &&
		ip -n "$ns_gw" link set lo up && ip -n "$ns_tg" link set lo up &&
		ip -n "$ns_gw" link set "$veth_gw" up && ip -n "$ns_tg" link set "$veth_tg" up
}; then
	echo "# SKIP: cannot make network namespaces and a veth pair here"
	exit 77
fi
pass "namespaces $ns_gw and $ns_tg joined by $veth_gw/$veth_tg"

# ---------------------------------------------------------------- target
truncate -s 64M "$work/disk.img"
ctl=$(_tgtd_free_ctl)
nsenter --net="/run/netns/$ns_tg" tgtd -f -C "$ctl" --iscsi portal=192.0.2.1:3260 >"$work/tgtd.log" 2>&1 </dev/null &
tgt_pid=$!
up=0
for ((i = 0; i < 100; i++)); do
	if _tgtadm "$ctl" --op show --mode sys >/dev/null 2>&1; then
		up=1
		break
	fi
	sleep 0.1
done
if ((up == 0)) || ! {
	_tgtadm "$ctl" --op new --mode target --tid 1 -T "$TGT_IQN" &&
		_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 1 -b "$work/disk.img" &&
		_tgtadm "$ctl" --op bind --mode target --tid 1 -I ALL
}; then
	fail "tgtd on 192.0.2.1:3260"
	note "$work/tgtd.log"
	summary
	exit 1
fi
pass "tgtd on 192.0.2.1:3260"

# ---------------------------------------------------------------- mount
mkdir -p "$work/mnt"
nsenter --net="/run/netns/$ns_gw" "$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:recovery \
	-o noop_interval=1,noop_timeout=2,replacement_timeout=60,login_timeout=5 \
	"iscsi://192.0.2.1:3260/$TGT_IQN/1" "$work/mnt" 2>"$work/daemon.log" &
daemon=$!
wait_lun "$work/mnt" 200 || true
if [[ ! -e $work/mnt/lun1 ]]; then
	fail "mounted over the veth link"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mounted over the veth link"

(
	passes=0
	bad=0
	while [[ ! -e $work/link.done ]] || ((passes == 0)); do
		passes=$((passes + 1))
		fio_verify "pass$passes" "$work/mnt/lun1" 16M || bad=$((bad + 1))
		((passes < 100)) || break
	done
	echo "$passes $bad" >"$work/fio.result"
) &
worker=$!

for ((k = 1; k <= 2; k++)); do
	sleep 2
	ip -n "$ns_gw" link set "$veth_gw" down
	sleep 5
	ip -n "$ns_gw" link set "$veth_gw" up
	sleep 1
done
touch "$work/link.done"
wait "$worker" || true
worker=''
read -r passes bad <"$work/fio.result" || { passes=0; bad=1; }
for f in "$work"/pass*.fio; do
	grep -q 'err= *0' "$f" || note "$f"
done
check_eq "$passes fio passes across 2 link outages of 5 s: 0 verify or I/O errors" "$bad" 0
# noop_interval=1,noop_timeout=2: each 5 s outage is noticed (about 3 s
# without a PDU from the target) and ends in exactly one reinstatement.
wait_reinstated 2 10 || true
check_eq "each outage is detected by the pings: the session was reinstated twice (downtime ms: $(downtimes | tr '\n' ' '))" \
	"$(reinstated_count)" 2
if ((bad)); then note "$work/daemon.log"; fi
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
