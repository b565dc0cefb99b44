#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Who answers after a reconnect, and which portal= may join:
#
#   identity.sh ISERFUSE one|off|two|unlisted
#
# one, off: tgtd A (a.img; its own serial, held in its T10 vendor ID
#   designator: a globally unique identity) on link A, the
#   daemon mounted through it alone (off: -o multipath=off).  tgtd A is
#   killed, a direct write is started (held by the recovery), and tgtd X
#   starts on the same address and port: the same target name and LUN
#   number, x.img, another serial.  The held write and a new read fail
#   with EIO, x.img is unchanged (by checksum), the daemon logs one "leads
#   to another device" line.  Then X goes and A is back: reads work again
#   (the rescan finds the device) and return a.img's data.
# two: tgtd A on both links, -o portal= for B (taken without SendTargets
#   listing it: the identity is globally unique); tgtd A is killed, a
#   direct write is started (held), X starts on link A and A again on
#   link B: path A is refused, the held write and a later one land in
#   a.img only, x.img is unchanged.
# unlisted: two tgtd processes with tgtd's default identity (the same
#   designators and serial), one per link: -o portal= for B is refused
#   (SendTargets on A does not list it), writes land in a.img only; with
#   -o accept_unlisted_portals B is used (paths 2).
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 2 "ISERFUSE one|off|two|unlisted" "$@"
need_exe "$1"
iserfuse=$1
mode=$2
need_root "needs root (network namespaces, tgtd, a mount)"
need_tools ip nsenter tgtd tgtadm dd md5sum fusermount3

mp_init "identity-$mode"
if ! mp_net; then
	echo "# SKIP: cannot make network namespaces and veth pairs here"
	exit 77
fi
pass "namespaces $ns_gw and $ns_tg joined by links A and B"

A_PARAMS=scsi_sn=identA0001,scsi_id=identA0001
X_PARAMS=scsi_sn=identX0009,scsi_id=identX0009

# tgtd IMG PORTAL... [-- PARAMS]: mp_tgtd with 64 MiB, its PID in $tpid; a failure ends the script.
tgtd_on() {
	if ! mp_tgtd "$@"; then
		fail "tgtd for $1"
		summary
		exit 1
	fi
	tpid=${mp_tgt_pids[-1]}
}

kill_tgtd() {
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

mounted() {
	if ! mp_mount "iscsi://$MP_A:3260/$TGT_IQN/1" "$@"; then
		fail "mounted through link A ($*)"
		note "$work/daemon.log"
		summary
		exit 1
	fi
	pass "mounted through link A ($*)"
}

# x.img (or b.img) holds a known pattern, so that "unchanged" means something
other_img() {
	truncate -s 64M "$1"
	dd if=/dev/urandom of="$1" bs=1M count=8 conv=notrunc status=none
}

dd if=/dev/urandom of="$work/p1" bs=1M count=1 status=none
dd if=/dev/urandom of="$work/p2" bs=1M count=1 status=none
p1=$(md5sum <"$work/p1")

case $mode in
one | off)
	other_img "$work/x.img"
	x_before=$(md5sum <"$work/x.img")
	tgtd_on "$work/a.img" 64M "$MP_A:3260" -- "$A_PARAMS"
	a_pid=$tpid
	opts=login_timeout=5,replacement_timeout=30,rescan_interval=1
	[[ $mode == off ]] && opts+=,multipath=off
	mounted -o "$opts"
	check "1 MiB written at 1 MiB" dd if="$work/p1" of="$work/mnt/lun1" bs=1M seek=1 oflag=direct conv=notrunc status=none
	check_eq "a.img holds it" "$(dd if="$work/a.img" bs=1M skip=1 count=1 status=none | md5sum)" "$p1"

	kill_tgtd "$a_pid"
	# held by the recovery until the portal answers again
	dd if="$work/p2" of="$work/mnt/lun1" bs=1M seek=4 oflag=direct conv=notrunc status=none 2>"$work/held.err" &
	worker=$!
	sleep 1
	tgtd_on "$work/x.img" 64M "$MP_A:3260" -- "$X_PARAMS"
	x_pid=$tpid
	pass "tgtd A killed, tgtd X (x.img, another serial) on the same portal"
	rc=0
	for ((i = 0; i < 300; i++)); do
		kill -0 "$worker" 2>/dev/null || break
		sleep 0.1
	done
	wait "$worker" || rc=$?
	worker=''
	check "the held write failed (exit $rc: $(tr '\n' ' ' <"$work/held.err"))" test "$rc" -ne 0
	check "... with EIO" grep -q "Input/output error" "$work/held.err"
	rc=0
	dd if="$work/mnt/lun1" of=/dev/null bs=4k count=1 iflag=direct status=none 2>"$work/read.err" || rc=$?
	check "a new read fails with EIO ($(tr '\n' ' ' <"$work/read.err"))" grep -q "Input/output error" "$work/read.err"
	rc=0
	dd if="$work/p2" of="$work/mnt/lun1" bs=1M seek=8 oflag=direct conv=notrunc status=none 2>"$work/write.err" || rc=$?
	check "a new write fails with EIO ($(tr '\n' ' ' <"$work/write.err"))" grep -q "Input/output error" "$work/write.err"
	check_eq "x.img is unchanged (by checksum)" "$(md5sum <"$work/x.img")" "$x_before"
	check_eq "the daemon logged one 'leads to another device' line" \
		"$(grep -c 'reinstated, but it leads to another device' "$work/daemon.log" || true)" 1
	grep 'another device' "$work/daemon.log" | sed 's/^/# daemon: /' || true

	kill_tgtd "$x_pid"
	tgtd_on "$work/a.img" 64M "$MP_A:3260" -- "$A_PARAMS"
	got=''
	for ((i = 0; i < 200; i++)); do
		if got=$(dd if="$work/mnt/lun1" bs=1M skip=1 count=1 iflag=direct status=none 2>/dev/null | md5sum) &&
			[[ $got == "$p1" ]]; then
			break
		fi
		sleep 0.1
	done
	check_eq "tgtd A back: reads work again within 20 s and return a.img's data" "$got" "$p1"
	check_eq "x.img is still unchanged" "$(md5sum <"$work/x.img")" "$x_before"
	check "the daemon logged 'the device is back'" grep -q "the device is back" "$work/daemon.log"
	;;
two)
	other_img "$work/x.img"
	x_before=$(md5sum <"$work/x.img")
	tgtd_on "$work/a.img" 64M "$MP_A:3260" "$MP_B:3260" -- "$A_PARAMS"
	a_pid=$tpid
	mounted -o "portal=$MP_B:3260,login_timeout=5,replacement_timeout=30"
	check "both paths up within 20 s (paths_up 2)" mp_wait_stat paths_up 2 20
	kill_tgtd "$a_pid"
	# held by the multipath layer until a path is usable again
	dd if="$work/p2" of="$work/mnt/lun1" bs=1M seek=4 oflag=direct conv=notrunc status=none 2>"$work/held.err" &
	worker=$!
	sleep 1
	tgtd_on "$work/x.img" 64M "$MP_A:3260" -- "$X_PARAMS"
	tgtd_on "$work/a.img" 64M "$MP_B:3260" -- "$A_PARAMS"
	pass "tgtd A killed; X (x.img) on link A, A again on link B"
	rc=0
	wait "$worker" || rc=$?
	worker=''
	check_eq "the held write succeeded ($(tr '\n' ' ' <"$work/held.err"))" "$rc" 0
	check_eq "... in a.img" "$(dd if="$work/a.img" bs=1M skip=4 count=1 status=none | md5sum)" "$(md5sum <"$work/p2")"
	check "path A refused within 20 s (paths_refused 1)" mp_wait_stat paths_refused 1 20
	check "the daemon logged 'path $MP_A:3260 refused: ...'" grep -q "path $MP_A:3260 refused: " "$work/daemon.log"
	grep "refused: " "$work/daemon.log" | sed 's/^/# daemon: /' || true
	check "1 MiB written at 1 MiB" dd if="$work/p1" of="$work/mnt/lun1" bs=1M seek=1 oflag=direct conv=notrunc status=none
	check_eq "a.img holds it" "$(dd if="$work/a.img" bs=1M skip=1 count=1 status=none | md5sum)" "$p1"
	check_eq "x.img is unchanged (by checksum)" "$(md5sum <"$work/x.img")" "$x_before"
	;;
unlisted)
	other_img "$work/b.img"
	b_before=$(md5sum <"$work/b.img")
	tgtd_on "$work/a.img" 64M "$MP_A:3260"
	tgtd_on "$work/b.img" 64M "$MP_B:3260"
	pass "two tgtd processes, default identity: a.img on link A, b.img on link B"
	mounted -o "portal=$MP_B:3260,login_timeout=5"
	check "B refused within 20 s (paths_refused 1)" mp_wait_stat paths_refused 1 20
	check_eq ".stats: paths 1" "$(mp_stat paths)" 1
	check "the line says why and names the option" \
		grep -q "path $MP_B:3260 refused: SendTargets on $MP_A:3260 does not list it.*accept_unlisted_portals" \
		"$work/daemon.log"
	grep "refused: " "$work/daemon.log" | sed 's/^/# daemon: /' || true
	check "1 MiB written at 1 MiB" dd if="$work/p1" of="$work/mnt/lun1" bs=1M seek=1 oflag=direct conv=notrunc status=none
	check_eq "a.img holds it" "$(dd if="$work/a.img" bs=1M skip=1 count=1 status=none | md5sum)" "$p1"
	check_eq "b.img is unchanged (by checksum)" "$(md5sum <"$work/b.img")" "$b_before"
	unmount_check
	: >"$work/daemon.log"
	mounted -o "portal=$MP_B:3260,accept_unlisted_portals,login_timeout=5"
	check "with accept_unlisted_portals B is used (paths 2 within 20 s)" mp_wait_stat paths 2 20
	;;
*)
	echo "usage: $0 ISERFUSE one|off|two|unlisted" >&2
	exit 2
	;;
esac

check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
