#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "digest" test of the target suite: HeaderDigest and DataDigest CRC32C
# (RFC 7143 §11.1, §13.1) against tgtd, through the initiator and through a
# mount.
#
#   digest.sh TARGET_IO ISERFUSE
#
# - target_io info reports the digests negotiated (TARGET_IO_HEADER_DIGEST /
#   TARGET_IO_DATA_DIGEST, or the URL's header_digest / data_digest) and
#   target_io verify passes with each digest on, and both;
# - "crc32c" (required) against a target set to None fails the login with a
#   clear message; "auto" falls back to None;
# - a relay (digest_proxy.py) that flips one bit in a Data-In payload or in a
#   PDU header: with digests the connection drops ("data digest mismatch" /
#   "header digest mismatch"), the session is reinstated and the command
#   re-issued, and verify passes; without them the corruption reaches the
#   data (which shows the relay really corrupts);
# - iserfuse -o header_digest=crc32c,data_digest=crc32c: dd through the
#   mount checked against the backing file; the mount fails (exit 1, one
#   line) when the target refuses; -o wins over the URL.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root, 2 on bad usage.
# Needs: tgt, fuse3 (fusermount3), python3 for the corruption checks.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 2 "TARGET_IO ISERFUSE" "$@"
target_io=$1
iserfuse=$2
need_exe "$target_io" "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the digest test runs tgtd and mounts, which need root"

info_field() {
	awk -v k="$2" 'index($0, k " ") == 1 { print substr($0, length(k) + 2); exit }' <<<"$1"
}

need_tools tgtd tgtadm fusermount3 mountpoint timeout ss dd cmp

suite_scratch digest
mnt=$work/mnt
mkdir -p "$mnt"
proxy_pid=
daemon_pid=
suite_drop=('tgtd/*.img' chunk got)
suite_teardown() {
	force_unmount "$mnt"
	[[ -n $daemon_pid ]] && _targets_kill "$daemon_pid" 5
	[[ -n $proxy_pid ]] && _targets_kill "$proxy_pid" 2
	tgtd_stop "$work/tgtd"
	if is_mounted "$mnt"; then
		suite_busy="$mnt is still mounted"
	fi
}

if ! tgtd_start "$work/tgtd" 64M 16M >/dev/null 2>"$work/start.err"; then
	fail "tgtd started"
	note "$work/start.err"
	echo "$passed passed, $failed failed"
	exit 1
fi
pass "tgtd started ($TGT_URL)"
ctl=$(<"$work/tgtd/ctl")
tport=$(<"$work/tgtd/port")
disk1=$work/tgtd/disk512.img
disk2=$work/tgtd/disk4k.img

# target_digests HEADER DATA: what tgtd offers and accepts for new logins.
target_digests() {
	_tgtadm "$ctl" --op update --mode target --tid 1 --name HeaderDigest --value "$1" &&
		_tgtadm "$ctl" --op update --mode target --tid 1 --name DataDigest --value "$2"
}

# info_digests LABEL URL HD DD WANT_H WANT_D: target_io info with the
# environment's digest choice HD/DD ("" = not set) reports WANT_H/WANT_D.
info_digests() {
	local label=$1 url=$2 out
	if out=$(TARGET_IO_HEADER_DIGEST=$3 TARGET_IO_DATA_DIGEST=$4 timeout 60 "$target_io" info "$url" 2>"$work/err"); then
		check_eq "$label: info reports header_digest $5, data_digest $6" \
			"$(info_field "$out" header_digest) $(info_field "$out" data_digest)" "$5 $6"
	else
		fail "$label: info exits 0 (exit $?)"
		note "$work/err"
	fi
}

# verify_with LABEL URL BACKING SEED HD DD
verify_with() {
	local rc=0
	TARGET_IO_HEADER_DIGEST=$5 TARGET_IO_DATA_DIGEST=$6 \
		timeout 180 "$target_io" verify "$2" "$3" "$4" >"$work/err" 2>&1 || rc=$?
	if ((rc == 0)); then
		pass "$1: verify against $(basename "$3"), seed $4"
	else
		fail "$1: verify against $(basename "$3"), seed $4 (exit $rc)"
		note "$work/err"
	fi
}

# ---------------------------------------------------------------- initiator

if ! target_digests CRC32C None; then
	fail "tgtadm sets HeaderDigest=CRC32C"
else
	info_digests "header digest" "$TGT_URL/1" crc32c none 1 0
	verify_with "header digest" "$TGT_URL/1" "$disk1" 11 crc32c none
fi
if ! target_digests None CRC32C; then
	fail "tgtadm sets DataDigest=CRC32C"
else
	info_digests "data digest" "$TGT_URL/1" none crc32c 0 1
	verify_with "data digest" "$TGT_URL/1" "$disk1" 12 none crc32c
fi
if ! target_digests CRC32C CRC32C; then
	fail "tgtadm sets both digests to CRC32C"
else
	info_digests "both digests" "$TGT_URL/1" crc32c crc32c 1 1
	verify_with "both digests" "$TGT_URL/1" "$disk1" 13 crc32c crc32c
	verify_with "both digests, 4 KiB blocks" "$TGT_URL/2" "$disk2" 14 crc32c crc32c
	info_digests "auto, target offers CRC32C" "$TGT_URL/1" auto auto 1 1
	info_digests "URL header_digest=crc32c&data_digest=crc32c" \
		"$TGT_URL/1?header_digest=crc32c&data_digest=crc32c" "" "" 1 1
	info_digests "URL crc32c-none, environment none wins" \
		"$TGT_URL/1?header_digest=crc32c-none&data_digest=crc32c-none" none none 0 0
fi
if target_digests None None; then
	info_digests "auto, target has None" "$TGT_URL/1" auto auto 0 0
	rc=0
	TARGET_IO_HEADER_DIGEST=crc32c timeout 60 "$target_io" info "$TGT_URL/1" >"$work/err" 2>&1 || rc=$?
	if ((rc != 0 && rc != 124)) && grep -q 'refused HeaderDigest=CRC32C' "$work/err"; then
		pass "header_digest=crc32c against HeaderDigest=None fails the login (exit $rc)"
	else
		fail "header_digest=crc32c against HeaderDigest=None fails the login (exit $rc)"
		note "$work/err"
	fi
	rc=0
	TARGET_IO_DATA_DIGEST=crc32c timeout 60 "$target_io" info "$TGT_URL/1" >"$work/err" 2>&1 || rc=$?
	if ((rc != 0 && rc != 124)) && grep -q 'refused DataDigest=CRC32C' "$work/err"; then
		pass "data_digest=crc32c against DataDigest=None fails the login (exit $rc)"
	else
		fail "data_digest=crc32c against DataDigest=None fails the login (exit $rc)"
		note "$work/err"
	fi
else
	fail "tgtadm sets both digests to None"
fi

# ---------------------------------------------------------------- corruption

# corrupt LABEL MODE HD DD WANT: verify through a relay that flips one bit
# (MODE data or header, in the 20th such PDU) with digests HD/DD (0/1).
# WANT is the line expected in the output ("data digest mismatch",
# "header digest mismatch", or "MISMATCH" for corruption nobody noticed).
corrupt() {
	local label=$1 mode=$2 hd=$3 dd=$4 want=$5 hv=none dv=none pport='' rc=0 i
	((hd)) && hv=crc32c
	((dd)) && dv=crc32c
	rm -f "$work/proxy.port"
	python3 "$here/digest_proxy.py" 0 "$tport" "$mode" 20 "$hd" "$dd" "$work/proxy.port" 2>"$work/proxy.err" &
	proxy_pid=$!
	for ((i = 0; i < 100; i++)); do
		[[ -s $work/proxy.port ]] && break
		sleep 0.1
	done
	pport=$(cat "$work/proxy.port" 2>/dev/null) || true
	if [[ -z $pport ]]; then
		fail "$label: relay started"
		note "$work/proxy.err"
		_targets_kill "$proxy_pid" 2
		proxy_pid=
		return 0
	fi
	TARGET_IO_HEADER_DIGEST=$hv TARGET_IO_DATA_DIGEST=$dv TARGET_IO_REPLACEMENT_TIMEOUT=30 \
		timeout 120 "$target_io" verify \
		"iscsi://127.0.0.1:$pport/$TGT_IQN/1" "$disk1" 5 >"$work/err" 2>&1 || rc=$?
	_targets_kill "$proxy_pid" 5
	proxy_pid=
	if ! grep -q 'corrupted' "$work/proxy.err"; then
		fail "$label: the relay corrupted a PDU (exit $rc)"
		note "$work/proxy.err"
		note "$work/err"
	elif [[ $want == MISMATCH ]]; then
		if ((rc == 1)) && grep -q '^MISMATCH' "$work/err"; then
			pass "$label: corrupted data goes unnoticed by the protocol, verify sees it"
		else
			fail "$label: corrupted data reaches verify (exit $rc)"
			note "$work/err"
		fi
	elif ((rc == 0)) && grep -q "$want" "$work/err" && grep -q 'reinstated after digest error' "$work/err" &&
		! grep -q '^MISMATCH' "$work/err"; then
		pass "$label: \"$want\", the session is reinstated, the command retried, verify passes"
	else
		fail "$label: \"$want\", the session is reinstated, the command retried, verify passes (exit $rc)"
		note "$work/err"
		note "$work/proxy.err"
	fi
}

if ! command -v python3 >/dev/null 2>&1; then
	skip "corruption checks" "python3 is not installed"
elif target_digests CRC32C CRC32C; then
	corrupt "bit flipped in a Data-In payload, both digests" data 1 1 "data digest mismatch"
	corrupt "bit flipped in a Data-In payload, data digest only" data 0 1 "data digest mismatch"
	corrupt "bit flipped in a PDU header, both digests" header 1 1 "header digest mismatch"
	corrupt "bit flipped in a PDU header, header digest only" header 1 0 "header digest mismatch"
	corrupt "bit flipped in a Data-In payload, no digests" data 0 0 MISMATCH
else
	fail "tgtadm sets both digests to CRC32C"
fi

# ---------------------------------------------------------------- mount

initiator=iqn.2026-11.org.example:digest-test
# mount_ok LABEL URL OPTIONS...: iserfuse -f in the background (its log in
# mount.log); waits for the mount.
mount_ok() {
	local label=$1 url=$2 i
	shift 2
	"$iserfuse" -f -o "initiator_name=$initiator" "$@" "$url" "$mnt" >"$work/mount.log" 2>&1 &
	daemon_pid=$!
	for ((i = 0; i < 300; i++)); do
		is_mounted "$mnt" && [[ -e $mnt/lun1 ]] && break
		_targets_alive "$daemon_pid" || break
		sleep 0.1
	done
	if is_mounted "$mnt" && [[ -e $mnt/lun1 ]]; then
		pass "$label: mounted"
		return 0
	fi
	fail "$label: mounted"
	note "$work/mount.log"
	_targets_kill "$daemon_pid" 5
	daemon_pid=
	return 1
}
unmount() {
	fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	if [[ -n $daemon_pid ]]; then
		_targets_wait_gone "$daemon_pid" 30 || true
		_targets_kill "$daemon_pid" 5
		daemon_pid=
	fi
}

if target_digests CRC32C CRC32C &&
	mount_ok "-o header_digest=crc32c,data_digest=crc32c" "$TGT_URL" -d -o header_digest=crc32c,data_digest=crc32c; then
	# crc32c is required: the mount alone says both were negotiated; -d logs it too
	if grep -q 'HeaderDigest CRC32C, DataDigest CRC32C' "$work/mount.log"; then
		pass "the login negotiated both digests"
	else
		fail "the login negotiated both digests"
		note "$work/mount.log"
	fi
	# 6 MiB + 512 bytes at an odd offset, written through the mount ...
	off=$((3 * 1024 * 1024 + 512))
	len=$((6 * 1024 * 1024 + 512))
	head -c "$len" /dev/urandom >"$work/chunk"
	if dd if="$work/chunk" of="$mnt/lun1" bs=1M iflag=fullblock oflag=seek_bytes seek="$off" \
		conv=notrunc,fsync status=none 2>"$work/err" &&
		cmp -s "$work/chunk" <(dd if="$disk1" bs=1M iflag=skip_bytes,count_bytes,fullblock skip="$off" \
			count="$len" status=none); then
		pass "dd through the mount lands in the backing file"
	else
		fail "dd through the mount lands in the backing file"
		note "$work/err"
	fi
	# ... and backing-file data read back through it (O_DIRECT: no page cache).
	off=$((20 * 1024 * 1024))
	head -c "$len" /dev/urandom >"$work/chunk"
	dd if="$work/chunk" of="$disk1" bs=1M oflag=seek_bytes seek="$off" conv=notrunc,fsync status=none
	if dd if="$mnt/lun1" of="$work/got" bs=1M iflag=direct,skip_bytes,count_bytes skip="$off" count="$len" \
		status=none 2>"$work/err" && cmp -s "$work/chunk" "$work/got"; then
		pass "backing-file data reads back through the mount"
	else
		fail "backing-file data reads back through the mount"
		note "$work/err"
	fi
	if grep -q 'digest mismatch' "$work/mount.log"; then
		fail "no digest mismatch logged"
		note "$work/mount.log"
	else
		pass "no digest mismatch logged"
	fi
	unmount
fi

# The target refuses: exit 1, one clear line, nothing mounted.
if target_digests None None; then
	rc=0
	timeout -k 10 120 "$iserfuse" -o "initiator_name=$initiator" -o header_digest=crc32c "$TGT_URL" "$mnt" \
		>"$work/err" 2>&1 || rc=$?
	if ((rc == 1)) && grep -q 'refused HeaderDigest=CRC32C' "$work/err" && ! is_mounted "$mnt"; then
		pass "-o header_digest=crc32c against HeaderDigest=None: exit 1, \"$(head -n 1 "$work/err")\""
	else
		fail "-o header_digest=crc32c against HeaderDigest=None: exit 1 with a clear message (exit $rc)"
		note "$work/err"
		is_mounted "$mnt" && unmount
	fi
	rc=0
	timeout -k 10 120 "$iserfuse" -o "initiator_name=$initiator" -o data_digest=md5 "$TGT_URL" "$mnt" \
		>"$work/err" 2>&1 || rc=$?
	if ((rc == 1)) && grep -q "bad option 'data_digest=md5'" "$work/err" && ! is_mounted "$mnt"; then
		pass "-o data_digest=md5: exit 1, bad option"
	else
		fail "-o data_digest=md5: exit 1, bad option (exit $rc)"
		note "$work/err"
		is_mounted "$mnt" && unmount
	fi
	# the URL asks for CRC32C, which this target refuses: the mount works
	# only if -o header_digest=none wins
	if mount_ok "-o wins over the URL: header_digest=crc32c in the URL, -o header_digest=none" \
		"$TGT_URL?header_digest=crc32c" -o header_digest=none; then
		unmount
	fi
else
	fail "tgtadm sets both digests to None"
fi

summary
