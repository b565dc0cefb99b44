#!/bin/bash
# SPDX-License-Identifier: MIT
#
# iserfuse --list against real targets.
#
#   list.sh ISERFUSE_BINARY
#
# Starts tgtd with three targets (two disk LUNs each, 512- and 4096-byte
# blocks, small sparse files) and checks that `iserfuse --list` shows every
# target with the right LUNs, block counts, block sizes and sizes, and that
# it agrees with libiscsi's `iscsi-ls -s`; then istgt; then the failures
# (closed port, bad URL, a mount point given): exit 1, one line on stderr.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed, 77 (skip) when not root, 2 on bad usage.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
need_root "tgtd and istgt need root"

initiator=iqn.2026-11.org.example:list
check_eq() {
	if [[ $2 == "$3" ]]; then
		pass "$1"
	else
		fail "$1"
		echo '#   got:'
		printf '%s\n' "$2" | sed 's/^/#     /'
		echo '#   want:'
		printf '%s\n' "$3" | sed 's/^/#     /'
	fi
}

need_tools tgtd tgtadm istgt iscsi-ls timeout ss

suite_scratch list
suite_drop=('tgtd/*.img' 'istgt/*.img')
suite_teardown() {
	tgtd_stop "$work/tgtd"
	istgt_stop "$work/istgt"
}

# list URL: run iserfuse --list, stdout to $work/out, stderr to $work/err; sets rc.
list() {
	rc=0
	timeout -k 5 120 "$iserfuse" --list -o "initiator_name=$initiator" "$@" \
		>"$work/out" 2>"$work/err" </dev/null || rc=$?
}

# ---------------------------------------------------------------- tgtd, three targets

if tgtd_start "$work/tgtd" 64M 64M >/dev/null 2>"$work/log"; then
	pass "tgtd started"
else
	fail "tgtd started"
	note "$work/log"
	echo "$passed passed, $failed failed"
	exit 1
fi
port=$(<"$work/tgtd/port")
ctl=$(<"$work/tgtd/ctl")

# add_target TID NAME SIZE1 SIZE2: LUN 1 with 512-byte blocks, LUN 2 with 4096-byte blocks.
add_target() {
	local tid=$1 name=$2
	truncate -s "$3" "$work/tgtd/t$tid-1.img" && truncate -s "$4" "$work/tgtd/t$tid-2.img" &&
		_tgtadm "$ctl" --op new --mode target --tid "$tid" -T "$name" &&
		_tgtadm "$ctl" --op new --mode logicalunit --tid "$tid" --lun 1 -b "$work/tgtd/t$tid-1.img" &&
		_tgtadm "$ctl" --op new --mode logicalunit --tid "$tid" --lun 2 -b "$work/tgtd/t$tid-2.img" \
			--blocksize 4096 &&
		_tgtadm "$ctl" --op bind --mode target --tid "$tid" -I ALL
}
if add_target 2 iqn.2026-11.org.example:two 8M 12M >"$work/log" 2>&1 &&
	add_target 3 iqn.2026-11.org.example:three 20M 1M >>"$work/log" 2>&1; then
	pass "targets two and three added"
else
	fail "targets two and three added"
	note "$work/log"
fi

list "iscsi://127.0.0.1:$port"
if ((rc == 0)); then pass "--list exits 0"; else fail "--list exits 0 (got $rc)"; note "$work/err"; fi
note "$work/out" | sed 's/^#   /#   | /'

check_eq "--list shows the three targets" \
	"$(sed -n 's/^Target: //p' "$work/out" | sort)" \
	"$(printf '%s\n' iqn.2026-11.org.example:disk iqn.2026-11.org.example:three iqn.2026-11.org.example:two)"
check_eq "one portal line per target, the discovery portal with tag 1" \
	"$(grep -c "^  Portal: 127.0.0.1:$port,1\$" "$work/out" || true)" 3
check_eq "no error lines" "$(grep -c 'Error:\|failed' "$work/out" || true)" 0

# The disk LUNs of TARGET, one per line: "LUN BLOCKS BS (HUMAN)".
disk_luns() {
	awk -v t="$1" '
		/^Target: / { cur = $2; next }
		cur == t && /^  Lun [0-9]+: type disk,/ {
			lun = $2; sub(":", "", lun)
			match($0, /[0-9]+ blocks of [0-9]+ bytes \([^)]*\)/)
			split(substr($0, RSTART, RLENGTH), w, " ")
			print lun, w[1], w[4], w[6], w[7]
		}' "$work/out"
}
check_eq "target disk: LUNs 1 and 2 as tgtd has them" "$(disk_luns iqn.2026-11.org.example:disk)" \
	"$(printf '%s\n' '1 131072 512 (64 MiB)' '2 16384 4096 (64 MiB)')"
check_eq "target two: LUNs 1 and 2 as tgtd has them" "$(disk_luns iqn.2026-11.org.example:two)" \
	"$(printf '%s\n' '1 16384 512 (8 MiB)' '2 3072 4096 (12 MiB)')"
check_eq "target three: LUNs 1 and 2 as tgtd has them" "$(disk_luns iqn.2026-11.org.example:three)" \
	"$(printf '%s\n' '1 40960 512 (20 MiB)' '2 256 4096 (1 MiB)')"
for t in disk two three; do
	n=$(awk -v t="iqn.2026-11.org.example:$t" '/^Target: / { cur = $2; next } cur == t && /^  Lun /' "$work/out" | wc -l)
	check_eq "target $t: 3 LUNs (the controller and two disks)" "$n" 3
done
check_eq "every LUN 0 is tgtd's controller" \
	"$(grep -c '^  Lun 0: type controller, IET Controller, id -$' "$work/out" || true)" 3
check_eq "every disk LUN has a VPD 0x83 name" \
	"$(grep '^  Lun [12]: type disk' "$work/out" | grep -vc ', id -$' || true)" 6
# tgtd gives NAA 3 (locally assigned) before NAA 6 (IEEE Registered Extended):
# udev's scsi_id, and so the id, takes the NAA 6 one ("3" and 32 hex digits).
check_eq "every disk LUN's id is its NAA 6 designator, as udev names it" \
	"$(grep '^  Lun [12]: type disk' "$work/out" | grep -Ec ', id 36[0-9a-f]{31}$' || true)" 6

# Cross-check against libiscsi.  iscsi-ls -s prints the last LBA times the
# block size, divided by 1024 while it is at least 1024, with k/M/G/T.
if timeout -k 5 60 iscsi-ls -s -i "$initiator" "iscsi://127.0.0.1:$port" >"$work/ls.out" 2>"$work/ls.err"; then
	pass "iscsi-ls -s works"
	theirs=$(awk '
		/^Target:/ { t = $1; sub("Target:", "", t); next }
		/^Lun:/ {
			lun = $1; sub("Lun:", "", lun); type = $2; sub("Type:", "", type)
			size = "-"; if (match($0, /Size:[^)]*/)) size = substr($0, RSTART + 5, RLENGTH - 5)
			print t, lun, type, size
		}' "$work/ls.out" | sort)
	ours=$(awk '
		function ls_size(v,   u, i) {
			split(" k M G T P", u, " "); i = 0
			while (v >= 1024) { v = int(v / 1024); i++ }
			return v (i ? u[i] : "")
		}
		/^Target: / { t = $2; next }
		/^  Lun / {
			lun = $2; sub(":", "", lun)
			if ($4 == "disk,") {
				match($0, /[0-9]+ blocks of [0-9]+ bytes/)
				split(substr($0, RSTART, RLENGTH), w, " ")
				print t, lun, "DIRECT_ACCESS", ls_size((w[1] - 1) * w[4])
			} else if ($4 == "controller,") {
				print t, lun, "STORAGE_ARRAY_CONTROLLER", "-"
			} else {
				print t, lun, "other", "-"
			}
		}' "$work/out" | sort)
	check_eq "--list agrees with iscsi-ls -s on targets, LUNs, types and sizes" "$ours" "$theirs"
else
	fail "iscsi-ls -s works"
	note "$work/ls.err"
fi

# A URL naming a target lists that target only.
list "iscsi://127.0.0.1:$port/iqn.2026-11.org.example:two"
check_eq "--list with a target in the URL shows that target only" \
	"$rc $(sed -n 's/^Target: //p' "$work/out" | paste -sd ' ' -)" "0 iqn.2026-11.org.example:two"

# A target that discovery shows but whose login fails (it wants CHAP): an
# Error: line for it, the others still listed, exit 0.
truncate -s 4M "$work/tgtd/t4-1.img"
if _tgtadm "$ctl" --op new --mode target --tid 4 -T iqn.2026-11.org.example:four >"$work/log" 2>&1 &&
	_tgtadm "$ctl" --op new --mode logicalunit --tid 4 --lun 1 -b "$work/tgtd/t4-1.img" >>"$work/log" 2>&1 &&
	_tgtadm "$ctl" --op bind --mode target --tid 4 -I ALL >>"$work/log" 2>&1 &&
	timeout 10 tgtadm -C "$ctl" --op new --mode account --user listuser --password listsecret123 >>"$work/log" 2>&1 &&
	timeout 10 tgtadm -C "$ctl" --op bind --mode account --tid 4 --user listuser >>"$work/log" 2>&1; then
	list "iscsi://127.0.0.1:$port"
	check_eq "a target whose login fails: still exit 0" "$rc" 0
	check_eq "a target whose login fails: four targets listed" "$(grep -c '^Target: ' "$work/out" || true)" 4
	check_eq "a target whose login fails: one Error: line, under it" \
		"$(awk '/^Target: / { t = $2 } /^  Error: / { print t }' "$work/out")" iqn.2026-11.org.example:four
	check_eq "a target whose login fails: the other disk LUNs are all there" \
		"$(grep -c '^  Lun [12]: type disk' "$work/out" || true)" 6
else
	fail "target four (CHAP) added"
	note "$work/log"
fi

# ---------------------------------------------------------------- failures

# must_fail WHAT ARGS...: exit 1, one line on stderr, nothing on stdout.
must_fail() {
	local what=$1 lines
	shift
	list "$@"
	if ((rc == 1)); then pass "$what: exit 1"; else fail "$what: exit 1 (got $rc)"; note "$work/err"; fi
	lines=$(wc -l <"$work/err")
	if ((lines == 1)); then
		pass "$what: one line on stderr ($(<"$work/err"))"
	else
		fail "$what: one line on stderr (got $lines)"
		note "$work/err"
	fi
	check_eq "$what: nothing on stdout" "$(wc -c <"$work/out")" 0
}
if dead=$(free_port); then
	must_fail "--list on a closed port" "iscsi://127.0.0.1:$dead"
fi
must_fail "--list with a bad URL" "iscsi://127.0.0.1:0"
must_fail "--list with an http URL" "http://127.0.0.1/"
must_fail "--list with a mount point" "iscsi://127.0.0.1:$port" "$work"

# ---------------------------------------------------------------- istgt

if istgt_start "$work/istgt" 32 >/dev/null 2>"$work/log"; then
	pass "istgt started"
	iport=$(<"$work/istgt/port")
	list "iscsi://127.0.0.1:$iport"
	if ((rc == 0)); then pass "istgt: --list exits 0"; else fail "istgt: --list exits 0 (got $rc)"; note "$work/err"; fi
	note "$work/out" | sed 's/^#   /#   | /'
	check_eq "istgt: the target is listed" "$(sed -n 's/^Target: //p' "$work/out")" "$ISTGT_IQN"
	check_eq "istgt: its portal with tag 1" "$(sed -n 's/^  Portal: //p' "$work/out")" "127.0.0.1:$iport,1"
	check_eq "istgt: LUN 0 is a 32 MiB disk of 512-byte blocks" "$(disk_luns "$ISTGT_IQN")" "0 65536 512 (32 MiB)"
else
	fail "istgt started"
	note "$work/log"
fi

echo "$passed passed, $failed failed"
((failed == 0))
