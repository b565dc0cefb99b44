#!/bin/bash
# SPDX-License-Identifier: MIT
# rxe-up.sh - inside the lab guest: soft-RoCE devices to test against.
# All addresses are TEST-NET-1 (192.0.2.0/24, never routed) and exist only
# inside the guest, which has no network card at all.
#
# RDMA_LAB_MODE=wire (default): two RDMA devices joined by a veth "cable"
#   initiator side: veth0 192.0.2.1  rxe0
#   target side:    veth1 192.0.2.2  rxe1
#   Policy routing makes traffic between the two local addresses really cross
#   the veth pair (local table moved to pref 1000; "iif lo to .2 -> dev veth0",
#   "iif lo to .1 -> dev veth1"; accept_local=1, rp_filter=0). So RoCEv2
#   packets (UDP 4791) and iSCSI/TCP can be captured on veth0/veth1
#   (tcpdump/tshark decode them) and tc netem on veth0/veth1 can drop, delay or
#   reorder them. Why not two network namespaces: rdma_rxe in Linux 6.1 has its
#   UDP 4791 socket in the initial namespace only.
# RDMA_LAB_MODE=loop: one device, rxe0 on veth0 192.0.2.1; both ends use that
#   address and rdma_rxe loops packets back internally (nothing on the veth).
#
# RDMA_LAB_MTU (default 1500 -> RoCE active_mtu 1024; 4200+ gives 4096).
# Idempotent. Exit 0 when the device(s) are ACTIVE.
set -euo pipefail
MODE=${RDMA_LAB_MODE:-wire}
IP1=192.0.2.1
IP2=192.0.2.2
MTU=${RDMA_LAB_MTU:-1500}

modprobe rdma_rxe
modprobe rdma_ucm 2>/dev/null || true
ip link show veth0 >/dev/null 2>&1 || ip link add veth0 type veth peer name veth1
ip link set veth0 mtu "$MTU"; ip link set veth1 mtu "$MTU"
ip addr replace "$IP1/24" dev veth0
ip link set veth1 up
ip link set veth0 up
if [ "$MODE" = wire ]; then
	ip addr replace "$IP2/24" dev veth1
	for d in all default veth0 veth1; do
		sysctl -qw net.ipv4.conf.$d.accept_local=1 net.ipv4.conf.$d.rp_filter=0
	done
	rules=$(ip rule show)
	has() { grep -qE "^$1:[[:space:]]+from all $2" <<< "$rules"; }
	has 1000 'lookup local' || ip rule add pref 1000 lookup local
	if has 0 'lookup local'; then ip rule del pref 0 lookup local; fi
	has 100 "to $IP2" || ip rule add pref 100 iif lo to $IP2 lookup 102
	has 101 "to $IP1" || ip rule add pref 101 iif lo to $IP1 lookup 101
	ip route replace $IP2 dev veth0 src $IP1 table 102
	ip route replace $IP1 dev veth1 src $IP2 table 101
fi

add() {  # add RXE NETDEV
	rdma dev show "$1" >/dev/null 2>&1 || rdma link add "$1" type rxe netdev "$2"
	for _ in $(seq 100); do
		rdma link show "$1/1" 2>/dev/null | grep -q 'state ACTIVE' && return 0
		sleep 0.1
	done
	echo "rxe-up: $1 not ACTIVE: $(rdma link show "$1/1" 2>&1)" >&2
	return 1
}
add rxe0 veth0
[ "$MODE" = wire ] && add rxe1 veth1
rdma link show
if [ "$MODE" = wire ]; then
	echo "rxe-up: mode wire: initiator rxe0/veth0 $IP1 <-> target rxe1/veth1 $IP2"
	echo "RDMA_LAB_TARGET_IP=$IP2"
else
	echo "rxe-up: mode loop: rxe0/veth0 $IP1 (both ends)"
	echo "RDMA_LAB_TARGET_IP=$IP1"
fi
