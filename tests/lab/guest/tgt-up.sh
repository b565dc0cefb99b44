#!/bin/bash
# SPDX-License-Identifier: MIT
# tgt-up.sh - inside the lab guest: start tgtd (stgt, user-space target) and
# export one iSER target and one iSCSI/TCP target, each with a sparse LUN 1.
#
#   tgt-up.sh [SIZE]            (default SIZE 1G; backing files in /var/tmp)
#
# Targets (portal 192.0.2.2:3260 - 192.0.2.1 in RDMA_LAB_MODE=loop - TCP and
# RDMA-CM port 3260; tgtd itself listens on all guest addresses):
#   iqn.2024-01.lab.rdma:tgt-iser   --lld iser
#   iqn.2024-01.lab.rdma:tgt-tcp    --lld iscsi
#
# Debian 12's tgt 1.0.85 has a bug in the iSER login path (usr/iscsi/iser_text.c,
# fixed upstream in tgt 1.0.95, commit b73c64d): an iSER login is refused with
# "Target not found" (class 2 detail 3) unless the initiator NAME is also in an
# ACL - binding "-I ALL" is not enough. iSER SendTargets discovery shows nothing
# for the same reason. So we bind "-I ALL" plus a list of initiator names:
# the lab's own name (use it: iscsi-* -i NAME, or your initiator's name),
# libiscsi tools' default names, this host's open-iscsi name, and any names in
# $TGT_INITIATORS (space separated).
set -euo pipefail
SIZE=${1:-1G}
if [ "${RDMA_LAB_MODE:-wire}" = wire ]; then IP=${RDMA_LAB_TARGET_IP:-192.0.2.2}; else IP=${RDMA_LAB_TARGET_IP:-192.0.2.1}; fi
LAB_INITIATOR=${LAB_INITIATOR:-iqn.2024-01.lab.rdma:initiator}
NAMES="$LAB_INITIATOR iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-inq
iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-readcapacity16
iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls
iqn.2010-11.libiscsi:iscsi-perf
iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
${TGT_INITIATORS:-}"
if [ -r /etc/iscsi/initiatorname.iscsi ]; then
	NAMES="$NAMES $(sed -n 's/^InitiatorName=//p' /etc/iscsi/initiatorname.iscsi)"
fi

if ! tgtadm --op show --mode sys >/dev/null 2>&1; then
	mkdir -p /var/run/tgtd
	# pool_sz_mb: tgt's iSER registers (pins) its whole buffer pool, 1 GiB by default
	tgtd -f --iser "pool_sz_mb=${TGT_ISER_POOL_MB:-128}" > /var/tmp/tgtd.log 2>&1 &
	echo $! > /run/tgtd.pid
	for _ in $(seq 50); do tgtadm --op show --mode sys >/dev/null 2>&1 && break; sleep 0.2; done
fi
tgtadm --op show --mode sys >/dev/null || { echo "tgt-up: tgtd did not start" >&2; cat /var/tmp/tgtd.log >&2; exit 1; }

mk() {  # tid lld iqn file
	local tid=$1 lld=$2 iqn=$3 file=$4 n
	truncate -s "$SIZE" "$file"
	tgtadm --lld "$lld" --op new --mode target --tid "$tid" -T "$iqn"
	tgtadm --lld "$lld" --op new --mode logicalunit --tid "$tid" --lun 1 -b "$file"
	tgtadm --lld "$lld" --op bind --mode target --tid "$tid" -I ALL
	for n in $NAMES; do
		tgtadm --lld "$lld" --op bind --mode target --tid "$tid" -Q "$n"
	done
}
mk 1 iser  iqn.2024-01.lab.rdma:tgt-iser /var/tmp/tgt-iser.img
mk 2 iscsi iqn.2024-01.lab.rdma:tgt-tcp  /var/tmp/tgt-tcp.img
echo "tgt-up: tgtd pid $(cat /run/tgtd.pid 2>/dev/null || pgrep -x tgtd)"
echo "tgt-up: iser://$IP/iqn.2024-01.lab.rdma:tgt-iser/1  (or iscsi://...?iser)"
echo "tgt-up: iscsi://$IP/iqn.2024-01.lab.rdma:tgt-tcp/1"
echo "tgt-up: use initiator name $LAB_INITIATOR (iscsi-* -i NAME)"
