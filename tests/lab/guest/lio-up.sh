#!/bin/bash
# SPDX-License-Identifier: MIT
# lio-up.sh - inside the lab guest: LIO kernel target with iSER (ib_isert) and
# iSCSI/TCP on one portal, LUN 0 = sparse fileio backstore. Plain configfs
# writes, no targetcli (Debian 12's targetcli-fb needs a D-Bus system bus even
# for "ls": ui_backstore.py calls Gio.bus_get_sync(SYSTEM) outside its try).
#
#   lio-up.sh [SIZE]     (default 1G; backing file /var/tmp/lio.img)
#
# Target iqn.2024-01.lab.rdma:lio, portal 192.0.2.2:${LIO_PORT:-3261} (192.0.2.1 in loop mode)
# (3261 so that it can run next to tgtd on 3260). Open ACLs (generate_node_acls),
# no authentication, writable.
set -euo pipefail
SIZE=${1:-1G}
if [ "${RDMA_LAB_MODE:-wire}" = wire ]; then IP=${RDMA_LAB_TARGET_IP:-192.0.2.2}; else IP=${RDMA_LAB_TARGET_IP:-192.0.2.1}; fi
PORT=${LIO_PORT:-3261}
IQN=iqn.2024-01.lab.rdma:lio
IMG=/var/tmp/lio.img

modprobe configfs
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
modprobe target_core_mod
modprobe target_core_file
modprobe iscsi_target_mod
modprobe ib_isert
T=/sys/kernel/config/target
[ -d $T/iscsi ] || mkdir $T/iscsi

truncate -s "$SIZE" $IMG
bytes=$(stat -c %s $IMG)
B=$T/core/fileio_0/lun0
mkdir -p $B
echo "fd_dev_name=$IMG,fd_dev_size=$bytes" > $B/control
echo 1 > $B/enable
# a unit serial, as targetcli sets one: without it LIO lists no VPD pages in
# page 0 and has no NAA or T10 designator in page 0x83
echo "6001405lab0lio00" > $B/wwn/vpd_unit_serial

G=$T/iscsi/$IQN/tpgt_1
mkdir -p $G/lun/lun_0
ln -s $B $G/lun/lun_0/lab_lun0
mkdir $G/np/$IP:$PORT
echo 1 > $G/np/$IP:$PORT/iser
echo 0 > $G/attrib/authentication
echo 1 > $G/attrib/generate_node_acls
echo 1 > $G/attrib/cache_dynamic_acls
echo 0 > $G/attrib/demo_mode_write_protect
echo 1 > $G/enable
echo "lio-up: iser://$IP:$PORT/$IQN/0   and   iscsi://$IP:$PORT/$IQN/0"
