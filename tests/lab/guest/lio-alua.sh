#!/bin/bash
# SPDX-License-Identifier: MIT
# lio-alua.sh - inside the lab guest, after lio-up.sh: a second portal of the
# LIO target for the same LUN, in its own target port group, with implicit
# ALUA on both groups (SPC-4 §5.15), so that a mount has two paths: iSER
# through tpgt_1 (the default group, id 0) and TCP through tpgt_2 on
# ${LIO_PORT2:-3262} (group lab_tpg2, id 2).
#
#   lio-alua.sh up              create the second portal and group
#   lio-alua.sh set AO_1 AO_2   the two groups' access states (0 active/optimized,
#                               1 active/non-optimized, 2 standby, 3 unavailable)
set -euo pipefail
if [ "${RDMA_LAB_MODE:-wire}" = wire ]; then IP=${RDMA_LAB_TARGET_IP:-192.0.2.2}; else IP=${RDMA_LAB_TARGET_IP:-192.0.2.1}; fi
PORT2=${LIO_PORT2:-3262}
IQN=iqn.2024-01.lab.rdma:lio
T=/sys/kernel/config/target
B=$T/core/fileio_0/lun0
G1=$B/alua/default_tg_pt_gp
G2=$B/alua/lab_tpg2

case ${1:-} in
up)
	echo 1 > "$G1/alua_access_type" # implicit: the target changes the states (here: configfs)
	mkdir -p "$G2"
	echo 2 > "$G2/tg_pt_gp_id"
	echo 1 > "$G2/alua_access_type"
	P=$T/iscsi/$IQN/tpgt_2
	mkdir -p "$P/lun/lun_0"
	ln -s "$B" "$P/lun/lun_0/lab_lun0_b"
	echo lab_tpg2 > "$P/lun/lun_0/alua_tg_pt_gp"
	mkdir "$P/np/$IP:$PORT2"
	echo 0 > "$P/attrib/authentication"
	echo 1 > "$P/attrib/generate_node_acls"
	echo 1 > "$P/attrib/cache_dynamic_acls"
	echo 0 > "$P/attrib/demo_mode_write_protect"
	echo 1 > "$P/enable"
	echo "lio-alua: tpgt_2 on $IP:$PORT2 (TCP), group lab_tpg2 (id 2)"
	;;
set)
	echo "$2" > "$G1/alua_access_state"
	echo "$3" > "$G2/alua_access_state"
	;;
*)
	echo "usage: $0 up | set STATE_1 STATE_2" >&2
	exit 2
	;;
esac
