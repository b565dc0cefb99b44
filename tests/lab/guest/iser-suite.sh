#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The iser suite, inside the lab guest (tests/lab/iser.sh boots it):
# soft-RoCE (rdma_rxe on a veth pair), tgtd with its iSER driver, then
# iserfuse over iSER: transport=auto picks iSER, data written and read
# back, libiscsi ?iser cross-check (libiscsi-read.py), 4 MiB I/O split for tgt's 512 KiB
# per-command cap, QD 128 verified random writes, immediate/unsolicited
# data on and off, 20 mount/unmount cycles, iSER discovery (--list),
# .stats after a 256 MiB aligned run (skipped without .stats), 1% loss
# with netem, and a target killed mid-I/O.  Then IOPS figures (perf.txt).
#   iser-suite.sh BUILD_DIR OUT_DIR
set -uo pipefail
BUILD=$1
OUT=${2:-/lab}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../lib/report.sh
source "$HERE/../../lib/report.sh"
IQN=iqn.2024-01.lab.rdma:tgt-iser
NAME=iqn.2024-01.lab.rdma:iserfuse
PORTAL=192.0.2.2
URL="iscsi://$PORTAL/$IQN/1"
MNT=$(mktemp -d /tmp/iser-mnt.XXXXXX)
LOG=$OUT/iserfuse.log
export TGT_INITIATORS="$NAME iqn.2026-11.org.example:iserfuse-perf"

bash "$HERE/rxe-up.sh" > "$OUT/rxe.log" 2>&1 || { fail "rdma_rxe up"; note "$OUT/rxe.log"; summary; exit 1; }
bash "$HERE/tgt-up.sh" 1G > "$OUT/tgt.log" 2>&1 || { fail "tgtd up"; note "$OUT/tgt.log"; summary; exit 1; }
modprobe fuse
pass "soft-RoCE and tgtd iSER target up"

LUNF=lun1
mount_lun() { # OPTIONS...: mount, wait for $LUNF
	"$BUILD/iserfuse" -o "initiator_name=$NAME" "$@" "$URL" "$MNT" >> "$LOG" 2>&1 || { echo "# iserfuse exit $?" >> "$LOG"; return 1; }
	for _ in $(seq 300); do [ -e "$MNT/$LUNF" ] && return 0; sleep 0.1; done
	echo "# no $MNT/$LUNF after 30 s" >> "$LOG"
	return 1
}
umount_lun() { fusermount3 -u "$MNT" 2>/dev/null; for _ in $(seq 100); do mountpoint -q "$MNT" || return 0; sleep 0.1; done; return 1; }
roundtrip() { # SIZE_MIB OFFSET_MIB BS: write random data with O_DIRECT, read back, compare
	head -c "$(( $1 * 1048576 ))" /dev/urandom > /tmp/src
	dd if=/tmp/src of="$MNT/$LUNF" bs="$3" seek="$(( $2 * 1048576 ))" oflag=direct,seek_bytes conv=notrunc status=none &&
	dd if="$MNT/$LUNF" of=/tmp/back bs="$3" skip="$(( $2 * 1048576 ))" count="$(( $1 * 1048576 ))" \
		iflag=direct,skip_bytes,count_bytes status=none && cmp -s /tmp/src /tmp/back
}

# transport=auto over the rxe route picks iSER
: > "$LOG"
if mount_lun -o transport=auto; then
	check "transport=auto picks iSER" grep -q "transport: iSER" "$LOG"
	check "8 MiB written and read back over iSER (1 MiB requests)" roundtrip 8 0 1M
	if [ -e "$MNT/.stats" ]; then
		stat_of() { awk -v k="$1" '$1==k{print $2}' "$MNT/.stats"; }
		w0=$(stat_of bytes_written)
		if fio --name=seq --filename="$MNT/lun1" --rw=write --bs=1M --size=256M --direct=1 --ioengine=libaio --iodepth=16 > "$OUT/fio-256.txt" 2>&1; then
			pass "256 MiB of aligned 1 MiB writes (fio)"
		else
			fail "256 MiB of aligned 1 MiB writes (fio exit $?)"; note "$OUT/fio-256.txt"
		fi
		check_eq ".stats bytes_written grows by the 256 MiB fio wrote" "$(( $(stat_of bytes_written) - ${w0:-0} ))" 268435456
		check_eq ".stats mr_registrations" "$(stat_of mr_registrations)" 1
		check_eq ".stats payload_bytes_copied after 8 MiB and 256 MiB of aligned writes" "$(stat_of payload_bytes_copied)" 0
		check_eq ".stats transport" "$(stat_of transport)" iser
	else
		skip ".stats after 256 MiB aligned fio" "no .stats file in this build"
	fi
	check "unaligned 1000-byte write read back" bash -c "head -c 1000 /dev/urandom > /tmp/u; dd if=/tmp/u of=$MNT/lun1 bs=1000 seek=12345 oflag=seek_bytes conv=notrunc status=none; dd if=$MNT/lun1 bs=1000 skip=12345 iflag=skip_bytes count=1 status=none | cmp -s - /tmp/u"
	# cross-check: libiscsi over iSER reads back what iserfuse wrote
	if iscsi-readcapacity16 -i "$NAME" "iscsi://$PORTAL/$IQN/1?iser" > "$OUT/rc16.txt" 2>&1; then
		pass "libiscsi ?iser reaches the same LUN (iscsi-readcapacity16)"
	else
		fail "libiscsi ?iser reaches the same LUN"; note "$OUT/rc16.txt"
	fi
	head -c 1048576 /dev/urandom > /tmp/first
	rm -f /tmp/first.libiscsi
	if dd if=/tmp/first of="$MNT/lun1" bs=1M seek=300 oflag=direct conv=notrunc,fsync status=none 2> "$OUT/xcheck.txt" &&
		timeout 120 python3 "$HERE/libiscsi-read.py" --iser "$NAME" "$PORTAL:3260" "$IQN" 1 $((300 << 20)) 1048576 \
			/tmp/first.libiscsi >> "$OUT/xcheck.txt" 2>&1 &&
		cmp /tmp/first /tmp/first.libiscsi >> "$OUT/xcheck.txt" 2>&1; then
		pass "libiscsi ?iser reads back the 1 MiB iserfuse wrote at 300 MiB"
	else
		fail "libiscsi ?iser reads back the 1 MiB iserfuse wrote at 300 MiB"; note "$OUT/xcheck.txt"
	fi
	check "unmount" umount_lun
else
	fail "mount with transport=auto"; note "$LOG"
fi

# 4 MiB writes and reads: 1 MiB FUSE requests (FUSE's own limit), each split
# into commands of at most tgt's 512 KiB
: > "$LOG"
if mount_lun -o transport=iser,max_io_kib=1024,queue_depth=32; then
	check "4 MiB I/O (1 MiB FUSE requests, 512 KiB commands) read back" roundtrip 16 32 4M
	check "unmount" umount_lun
else
	fail "mount with max_io_kib=4096"; note "$LOG"
fi

# QD 128 verified random writes of 4-64 KiB, with the target offering
# immediate and unsolicited data (ImmediateData=Yes, InitialR2T=No) and
# not: we keep InitialR2T=Yes over iSER, so the first 8 KiB at most ride
# in the command's SEND and the target RDMA-reads the rest
# target_param TID NAME VALUE: set an iSCSI parameter of the iSER target; true
# when tgtadm accepts it and the target then shows NAME=VALUE
target_param() {
	tgtadm --lld iser --op update --mode target --tid "$1" --name "$2" --value "$3" >> "$OUT/tgtadm.txt" 2>&1 &&
		tgtadm --lld iser --op show --mode target --tid "$1" 2>> "$OUT/tgtadm.txt" | grep -x "$2=$3" > /dev/null
}
for imm in No Yes; do
	r2t=$([ $imm = Yes ] && echo No || echo Yes)
	tid=$(tgtadm --lld iser --op show --mode target | awk -v q="$IQN" '$0 ~ q {sub(":","",$2); print $2; exit}')
	if [ -n "$tid" ] && target_param "$tid" ImmediateData $imm && target_param "$tid" InitialR2T "$r2t"; then
		pass "the target offers ImmediateData=$imm, InitialR2T=$r2t (tgtadm update, then show)"
	else
		fail "the target offers ImmediateData=$imm, InitialR2T=$r2t (tgtadm update, then show; tid '$tid')"; note "$OUT/tgtadm.txt"
		continue
	fi
	: > "$LOG"
	if mount_lun -o transport=iser,queue_depth=128,log_level=info; then
		grep -o "ImmediateData [A-Za-z]*, InitialR2T [A-Za-z]*" "$LOG" | head -1 | sed 's/^/# negotiated: /'
		# (in the No round tgt offers InitialR2T=Yes itself; the Yes round tests our offer)
		check "InitialR2T=Yes whatever the target offers (ImmediateData=$imm)" grep -q "InitialR2T Yes" "$LOG"
		if timeout 300 fio --name=qd128 --filename="$MNT/lun1" --rw=randwrite --bsrange=4k-64k --size=16M --offset=64M \
			--direct=1 --ioengine=libaio --iodepth=128 --verify=crc32c --do_verify=1 --verify_state_save=0 > "$OUT/fio-qd128-$imm.txt" 2>&1; then
			pass "QD 128 verified random writes (target ImmediateData=$imm)"
		else
			fail "QD 128 verified random writes (target ImmediateData=$imm)"; note "$OUT/fio-qd128-$imm.txt"
		fi
		check "8 MiB sequential round trip (target ImmediateData=$imm)" roundtrip 8 100 512k
		check "unmount" umount_lun
	else
		fail "mount (ImmediateData=$imm)"; note "$LOG"
	fi
done

# Multipath with ALUA on LIO: path0 over iSER (tpgt_1, the default target port
# group), path1 over TCP (tpgt_2 on :3262, group id 2), the same LUN.  Reads
# follow the active/optimized group; the states swapped at the target
# (UNIT ATTENTION 2Ah/06h) move them to the other path; data round trips.
lio_alua_paths() {
	local line0 line1 c0 c1 d0 d1
	if ! bash "$HERE/lio-alua.sh" up >> "$OUT/lio.log" 2>&1 || ! bash "$HERE/lio-alua.sh" set 0 1 >> "$OUT/lio.log" 2>&1; then
		fail "LIO ALUA: a second portal in its own target port group"; note "$OUT/lio.log"
		return
	fi
	: > "$LOG"
	B_ALUA=/sys/kernel/config/target/core/fileio_0/lun0/alua
	if ! mount_lun -o "transport=auto,portal=$PORTAL:3262,cache_size=0,log_level=info,log_file=$OUT/lio-alua-daemon.log"; then
		fail "LIO ALUA: mount with portal=$PORTAL:3262"; note "$LOG"
		return
	fi
	stat_of() { awk -v k="$1" '$1==k{print $2}' "$MNT/.stats"; }
	path_cmds() { awk -v k="path$1" '$1==k' "$MNT/.stats" | tr ' ' '\n' | sed -n 's/^commands=//p'; }
	for _ in $(seq 150); do [ "$(stat_of paths_up)" = 2 ] && break; sleep 0.2; done
	check_eq "LIO ALUA: both paths up" "$(stat_of paths_up)" 2
	line0=$(awk '$1=="path0"' "$MNT/.stats"); line1=$(awk '$1=="path1"' "$MNT/.stats")
	echo "# $line0"; echo "# $line1"
	check_eq "LIO ALUA: path0 over iSER, active/optimized" "$(echo "$line0" | awk '{print $3, $5}')" "iser active/optimized"
	check_eq "LIO ALUA: path1 over TCP, active/non-optimized" "$(echo "$line1" | awk '{print $3, $5}')" "tcp active/non-optimized"
	if ! echo "$line0" | grep -q " active/optimized "; then # what the target reports, for the log
		"$BUILD/iserfuse" --list -o "initiator_name=$NAME" "iscsi://$PORTAL:3261" 2>&1 | sed 's/^/# list: /' | head -20
		grep -v "logged in" "$OUT/lio-alua-daemon.log" | sed 's/^/# log: /' | head -20
		for f in "$B_ALUA"/*/alua_access_state "$B_ALUA"/*/alua_access_type "$B_ALUA"/*/tg_pt_gp_id; do echo "# $f: $(cat "$f")"; done
	fi
	c0=$(path_cmds 0); c1=$(path_cmds 1)
	dd if="$MNT/$LUNF" of=/dev/null bs=64k count=32 iflag=direct status=none
	d0=$(( $(path_cmds 0) - c0 )); d1=$(( $(path_cmds 1) - c1 ))
	check "LIO ALUA: reads down the optimized iSER path only (path0 +$d0, path1 +$d1)" test "$d0" -ge 32 -a "$d1" -eq 0
	bash "$HERE/lio-alua.sh" set 1 0 >> "$OUT/lio.log" 2>&1
	dd if="$MNT/$LUNF" of=/dev/null bs=4k count=1 iflag=direct status=none # meets the UNIT ATTENTION
	for _ in $(seq 50); do awk '$1=="path1"' "$MNT/.stats" | grep -q " active/optimized " && break; sleep 0.1; done
	c0=$(path_cmds 0); c1=$(path_cmds 1)
	dd if="$MNT/$LUNF" of=/dev/null bs=64k count=32 iflag=direct status=none
	d0=$(( $(path_cmds 0) - c0 )); d1=$(( $(path_cmds 1) - c1 ))
	check "LIO ALUA: states swapped at the target: reads down the TCP path only (path0 +$d0, path1 +$d1)" test "$d1" -ge 32 -a "$d0" -eq 0
	check "LIO ALUA: 8 MiB round trip after the swap" roundtrip 8 16 512k
	grep -E "ALUA|path " "$OUT/lio-alua-daemon.log" | sed 's/^/# /' | head -10
	check "LIO ALUA: unmount" umount_lun
}

# the kernel LIO target with ib_isert (ImmediateData=Yes by default: the
# Write Base Offset then starts after the immediate part)
if bash "$HERE/lio-up.sh" 256M > "$OUT/lio.log" 2>&1; then
	URL_SAVE=$URL
	URL="iscsi://$PORTAL:3261/iqn.2024-01.lab.rdma:lio/0"
	LUNF=lun0
	: > "$LOG"
	if mount_lun -o transport=iser; then
		check "LIO ib_isert: 8 MiB round trip (512 KiB requests)" roundtrip 8 0 512k
		check "LIO ib_isert: unaligned 3000-byte write read back" bash -c "head -c 3000 /dev/urandom > /tmp/u; dd if=/tmp/u of=$MNT/lun0 bs=3000 seek=777 oflag=seek_bytes conv=notrunc status=none; dd if=$MNT/lun0 bs=3000 skip=777 iflag=skip_bytes count=1 status=none | cmp -s - /tmp/u"
		check "unmount" umount_lun
	else
		fail "mount LIO over iSER"; note "$LOG"
	fi
	lio_alua_paths
	URL=$URL_SAVE
	LUNF=lun1
else
	fail "LIO ib_isert target up"; note "$OUT/lio.log"
fi

# orderly teardown: no leak under valgrind (connect, I/O, logout, disconnect, destroy)
if command -v valgrind > /dev/null; then
	# the session must have done its 200 reads: a run that never connects leaks nothing either.
	# (No undefined-value checks: valgrind cannot see the RDMA device fill the receive buffers.)
	rc=0
	timeout 300 valgrind --leak-check=full --errors-for-leak-kinds=definite --undef-value-errors=no --error-exitcode=99 \
		"$BUILD/tests/iserfuse-perf" -m 4 -r -n 200 "iscsi://$PORTAL/$IQN/1?iser" > "$OUT/valgrind.txt" 2>&1 || rc=$?
	if [ $rc = 0 ] && grep -qx "ios 200" "$OUT/valgrind.txt" && grep -qx "errors 0" "$OUT/valgrind.txt" &&
		grep -q "definitely lost: 0 bytes\|no leaks are possible" "$OUT/valgrind.txt"; then
		pass "valgrind: 200 reads over iSER, exit 0, nothing definitely lost"
	else
		fail "valgrind: 200 reads over iSER, exit 0, nothing definitely lost (exit $rc)"; note "$OUT/valgrind.txt"
	fi
else
	skip "valgrind teardown check" "valgrind not installed"
fi

# discovery and a login in one process, over iSER
if timeout 60 "$BUILD/iserfuse" --list -o "initiator_name=$NAME" "iscsi://$PORTAL?iser" > "$OUT/list.txt" 2>&1 &&
	grep -q "$IQN" "$OUT/list.txt"; then
	pass "--list over iSER (discovery + login in one process)"
else
	fail "--list over iSER"; note "$OUT/list.txt"
fi

# 20 mount/unmount cycles in a row
ok=0
for i in $(seq 20); do
	: > "$LOG"
	if mount_lun -o transport=iser && head -c 4096 "$MNT/lun1" > /dev/null && umount_lun; then
		ok=$((ok + 1))
	else
		echo "# cycle $i failed" >> "$LOG"
		cp "$LOG" "$OUT/cycle-$i.log"
		umount_lun
	fi
done
check_eq "20 mount/unmount cycles over iSER" "$ok" 20
for f in "$OUT"/cycle-*.log; do [ -e "$f" ] && note "$f"; done

# IOPS: 4 KiB random reads, iserfuse raw, through FUSE, libiscsi ?iser (emulated CPU: relative only)
{
	for qd in 1 32 128; do
		r=$(timeout 60 "$BUILD/tests/iserfuse-perf" -m $qd -r -t 5 "iscsi://$PORTAL/$IQN/1?iser" 2>&1 | awk '/^iops/{print $2}')
		echo "iserfuse-perf raw iSER qd $qd: ${r:-failed} IOPS"
	done
	if mount_lun -o transport=iser; then
		for qd in 1 32 128; do
			r=$(timeout 60 fio --name=r --filename="$MNT/lun1" --rw=randread --bs=4k --size=256M --direct=1 \
				--ioengine=libaio --iodepth=$qd --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print $8}')
			echo "fio via iserfuse FUSE iSER qd $qd: ${r:-failed} IOPS"
		done
		umount_lun
	fi
	for qd in 1 32 128; do
		timeout -s INT 7 iscsi-perf -i iqn.2010-11.libiscsi:iscsi-perf -m $qd "iscsi://$PORTAL/$IQN/1?iser" > /tmp/ip.txt 2>&1
		r=$(tr '\r' '\n' < /tmp/ip.txt | grep -o 'iops average [0-9]*' | tail -1 | awk '{print $3}')
		echo "libiscsi iscsi-perf ?iser qd $qd (sequential): ${r:-failed} IOPS"
	done
} > "$OUT/perf.txt" 2>&1
sed 's/^/# /' "$OUT/perf.txt"

# 1% packet loss on the initiator's veth: slow, but correct
: > "$LOG"
if mount_lun -o transport=iser,replacement_timeout=5; then
	if tc qdisc add dev veth0 root netem loss 1% delay 1ms > "$OUT/tc.txt" 2>&1 &&
		tc qdisc show dev veth0 | tee -a "$OUT/tc.txt" | grep "netem .*loss 1%" > /dev/null; then
		pass "netem: 1% loss on veth0 (tc qdisc add, then show)"
		check "4 MiB round trip under 1% loss" timeout 240 bash -c "$(declare -f roundtrip); MNT=$MNT LUNF=$LUNF roundtrip 4 200 256k"
		check "netem removed" tc qdisc del dev veth0 root
	else
		fail "netem: 1% loss on veth0 (tc qdisc add, then show)"; note "$OUT/tc.txt"
	fi
	# target killed mid-I/O (and not back): the I/O fails (EIO) once the
	# replacement timeout (5 s) is over, never hangs
	timeout 120 dd if="$MNT/lun1" of=/dev/null bs=1M count=1000 iflag=direct status=none &
	dd_pid=$!
	sleep 1
	kill -9 "$(cat /run/tgtd.pid)"
	if wait "$dd_pid"; then rc=0; else rc=$?; fi
	if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then pass "target killed mid-I/O: the read fails, no hang"; else fail "target killed mid-I/O (dd status $rc)"; fi
	check "unmount after the target died" umount_lun
else
	fail "mount for the loss test"; note "$LOG"
fi
summary
