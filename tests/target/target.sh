#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "target" suite: the initiator against two real iSCSI targets on
# loopback (tgtd with a 512-byte and a 4096-byte LUN, istgt with one LUN),
# cross-checked with libiscsi's own tools.
#
#   target.sh TARGET_IO
#
# TARGET_IO is the test program built from the initiator:
#   TARGET_IO info URL     prints "type N", "vendor STR", "product STR",
#                          "block_size N", "nblocks N", "wp 0|1",
#                          "luns L1,L2,..." (REPORT LUNS); exit 0
#   TARGET_IO verify URL BACKING_FILE SEED
#                          random writes/reads through the initiator,
#                          checked against BACKING_FILE; exit 0 if all match
#
# Prints "ok - ..." / "not ok - ..." per check (details on "# " lines) and
# "N passed, M failed" last; exits 1 if anything failed, 77 (skip) when not
# root, 2 on bad usage.  Needs: tgt, istgt, libiscsi-bin.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 TARGET_IO "$@"
target_io=$1
need_exe "$target_io"
need_root "the target suite runs tgtd and istgt, which need root"


# The value of "KEY VALUE" in TARGET_IO's info output ($1), trailing blanks
# removed.
info_field() {
	awk -v k="$2" 'index($0, k " ") == 1 { print substr($0, length(k) + 2); exit }' <<<"$1" |
		sed 's/[[:space:]]*$//'
}
# The value of "KEY:VALUE" in iscsi-inq / iscsi-readcapacity16 output ($1),
# trailing blanks (INQUIRY pads vendor and product) removed.
tool_field() {
	awk -v k="$2" 'index($0, k ":") == 1 { print substr($0, length(k) + 2); exit }' <<<"$1" |
		sed 's/[[:space:]]*$//'
}

need_tools tgtd tgtadm istgt iscsi-inq iscsi-readcapacity16 iscsi-ls iscsi-swp timeout ss

suite_scratch target
suite_drop=('*/*.img')
suite_kept='target logs'
suite_teardown() {
	tgtd_stop "$work/tgtd"
	istgt_stop "$work/istgt"
}

# ---------------------------------------------------------------- checks

# check_lun LABEL URL BACKING BLOCK_SIZE LUNS
check_lun() {
	local label=$1 url=$2 backing=$3 want_bs=$4 want_luns=$5
	local out inq cap val lba bs nblocks size want_nblocks seed

	if out=$(timeout 60 "$target_io" info "$url" 2>"$work/err"); then
		pass "$label: info exits 0"
	else
		fail "$label: info exits 0 (exit $?)"
		note "$work/err"
		return 0
	fi
	if ! inq=$(timeout 60 iscsi-inq "$url" 2>&1); then
		fail "$label: iscsi-inq works"
		printf '%s\n' "$inq" | sed 's/^/#   /'
		return 0
	fi
	if ! cap=$(timeout 60 iscsi-readcapacity16 "$url" 2>&1); then
		fail "$label: iscsi-readcapacity16 works"
		printf '%s\n' "$cap" | sed 's/^/#   /'
		return 0
	fi

	# type: 0 = direct access, as iscsi-inq sees it
	check_eq "$label: type is 0, iscsi-inq says $(tool_field "$inq" 'Peripheral Device Type')" \
		"$(info_field "$out" type)/$(tool_field "$inq" 'Peripheral Device Type')" "0/DIRECT_ACCESS"

	# vendor and product as iscsi-inq reports them (padding removed)
	val=$(tool_field "$inq" Vendor)
	if [[ -n $val ]]; then
		check_eq "$label: vendor matches iscsi-inq (\"$val\")" "$(info_field "$out" vendor)" "$val"
	else
		fail "$label: iscsi-inq shows a vendor"
	fi
	val=$(tool_field "$inq" Product)
	if [[ -n $val ]]; then
		check_eq "$label: product matches iscsi-inq (\"$val\")" "$(info_field "$out" product)" "$val"
	else
		fail "$label: iscsi-inq shows a product"
	fi

	# capacity as iscsi-readcapacity16 reports it, and as configured
	lba=$(tool_field "$cap" 'RETURNED LOGICAL BLOCK ADDRESS')
	bs=$(tool_field "$cap" 'LOGICAL BLOCK LENGTH IN BYTES')
	if [[ ! $lba =~ ^[0-9]+$ || ! $bs =~ ^[0-9]+$ ]]; then
		fail "$label: iscsi-readcapacity16 output parses"
		printf '%s\n' "$cap" | sed 's/^/#   /'
		return 0
	fi
	check_eq "$label: block_size matches iscsi-readcapacity16 ($bs)" "$(info_field "$out" block_size)" "$bs"
	check_eq "$label: iscsi-readcapacity16 block size is the configured $want_bs" "$bs" "$want_bs"
	nblocks=$((lba + 1))
	check_eq "$label: nblocks matches iscsi-readcapacity16 (last LBA $lba + 1)" "$(info_field "$out" nblocks)" "$nblocks"
	size=$(stat -c %s "$backing")
	want_nblocks=$((size / want_bs))
	check_eq "$label: nblocks is the backing file's $size bytes / $want_bs" "$nblocks" "$want_nblocks"

	check_eq "$label: wp is 0" "$(info_field "$out" wp)" 0
	check_eq "$label: luns (REPORT LUNS) is $want_luns" "$(info_field "$out" luns)" "$want_luns"

	for seed in 1 20261130; do
		if timeout 180 "$target_io" verify "$url" "$backing" "$seed" >"$work/err" 2>&1; then
			pass "$label: verify against $(basename "$backing"), seed $seed"
		else
			fail "$label: verify against $(basename "$backing"), seed $seed (exit $?)"
			note "$work/err"
		fi
	done
}

# check_swp LABEL URL: software write protect (tgtd honours MODE SELECT of
# the control page's SWP bit and then reports WP in MODE SENSE).
check_swp() {
	local label=$1 url=$2 out want
	for want in 1 0; do
		if [[ $want == 1 ]]; then
			timeout 60 iscsi-swp -s on "$url" >"$work/err" 2>&1 || {
				fail "$label: iscsi-swp -s on"
				note "$work/err"
				return 0
			}
		else
			timeout 60 iscsi-swp -s off "$url" >"$work/err" 2>&1 || {
				fail "$label: iscsi-swp -s off"
				note "$work/err"
				return 0
			}
		fi
		if out=$(timeout 60 "$target_io" info "$url" 2>"$work/err"); then
			check_eq "$label: wp is $want with SWP $( ((want)) && echo on || echo off)" "$(info_field "$out" wp)" "$want"
		else
			fail "$label: info exits 0 with SWP $( ((want)) && echo on || echo off)"
			note "$work/err"
		fi
	done
}

# expect_info_failure WHAT URL: info must exit non-zero, and not by hanging.
expect_info_failure() {
	local rc=0
	timeout 60 "$target_io" info "$2" >"$work/err" 2>&1 || rc=$?
	if ((rc != 0 && rc != 124)); then
		pass "$1: info fails (exit $rc)"
	else
		fail "$1: info fails (exit $rc$( ((rc == 124)) && echo ', timed out'))"
		note "$work/err"
	fi
}

# ---------------------------------------------------------------- run

tgt_ok=0
istgt_ok=0
if tgtd_start "$work/tgtd" >/dev/null 2>"$work/start.err"; then
	pass "tgtd started ($TGT_URL)"
	tgt_ok=1
else
	fail "tgtd started"
	note "$work/start.err"
fi
if istgt_start "$work/istgt" >/dev/null 2>"$work/start.err"; then
	pass "istgt started ($ISTGT_URL)"
	istgt_ok=1
else
	fail "istgt started"
	note "$work/start.err"
fi

if ((tgt_ok)); then
	# What libiscsi's REPORT LUNS sees, as "0,1,2".
	ls_luns=$(timeout 60 iscsi-ls -s "iscsi://127.0.0.1:$(<"$work/tgtd/port")" 2>&1 |
		sed -n 's/^Lun:\([0-9]*\).*/\1/p' | paste -sd, -) || true
	check_eq "tgtd: iscsi-ls -s lists LUNs 0,1,2" "$ls_luns" "0,1,2"

	check_lun "tgtd lun 1" "$TGT_URL/1" "$work/tgtd/disk512.img" 512 0,1,2
	check_swp "tgtd lun 1" "$TGT_URL/1"
	check_lun "tgtd lun 2" "$TGT_URL/2" "$work/tgtd/disk4k.img" 4096 0,1,2
fi
if ((istgt_ok)); then
	# istgt numbers its LUNs from 0 and has no controller LUN.
	check_lun "istgt lun 0" "$ISTGT_URL/0" "$work/istgt/disk.img" 512 0
fi

# Negative checks: these must fail, quickly.
if ((tgt_ok)); then
	expect_info_failure "unknown target name" \
		"iscsi://127.0.0.1:$(<"$work/tgtd/port")/iqn.2026-11.org.example:no-such-target/1"
fi
if port=$(free_port); then
	expect_info_failure "port nobody listens on" "iscsi://127.0.0.1:$port/$TGT_IQN/1"
fi
if ((tgt_ok && istgt_ok)); then
	# verify must notice when the backing file is not the LUN's (same size
	# and block size, different contents): it really compares.  It logs in
	# and does its I/O, and only the comparison with the file fails (not a
	# login or an I/O error, which exit 1 too).
	rc=0
	timeout 180 "$target_io" verify "$TGT_URL/1" "$work/istgt/disk.img" 3 >"$work/err" 2>&1 || rc=$?
	if ((rc == 1)) && grep -q '^MISMATCH backing file at ' "$work/err" &&
		grep -q '^ops [0-9]* mismatches [1-9]' "$work/err"; then
		pass "verify against the wrong backing file fails with MISMATCH (exit $rc)"
	else
		fail "verify against the wrong backing file fails with MISMATCH (exit $rc)"
		note "$work/err"
	fi
fi

echo "$passed passed, $failed failed"
((failed == 0))
