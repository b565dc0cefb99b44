#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A LUN's identity as multipath will compare it (initiator/lun/lun_ident.c),
# reported by a real tgtd, through tests/recovery/lunident_probe:
#
#   lunident.sh LUNIDENT_PROBE
#
# LUN 1 probed over two logins (two paths) is the same LUN; LUN 1 and
# LUN 2 differ first by a VPD 0x83 designator; LUN 1 after tgtd is killed,
# its backing file doubled and tgtd restarted differs by its capacity
# (131072 vs 262144 blocks of 512 bytes) and nothing before it.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 LUNIDENT_PROBE "$@"
need_exe "$1"
probe=$1
need_root "needs root (tgtd)"
need_tools tgtd tgtadm

suite_scratch lunident
suite_drop=('tgtd/*.img')
suite_teardown() {
	tgtd_stop "$work/tgtd"
}

if ! tgtd_start "$work/tgtd" 64M 64M >/dev/null; then
	fail "tgtd started"
	summary
	exit 1
fi
port=$(<"$work/tgtd/port")

# save NAME LUN: the identity of LUN over a new login into $work/NAME.id
save() {
	"$probe" save 127.0.0.1 "$port" "$TGT_IQN" "$2" "$work/$1.id" >"$work/$1.txt" 2>>"$work/probe.err"
}
# compare A B: the probe's verdict on $work/A.id and $work/B.id, then its exit status
compare() {
	local rc=0 out
	out=$("$probe" compare "$work/$1.id" "$work/$2.id") || rc=$?
	echo "$out ($rc)"
}

check "LUN 1, first login" save a1 1
check "LUN 1, second login" save b1 1
check "LUN 2, second login" save b2 2
echo "# LUN 1: $(<"$work/a1.txt")"
echo "# LUN 2: $(<"$work/b2.txt")"
check_eq "LUN 1 over two logins: the same LUN" "$(compare a1 b1)" "same (0)"
got=$(compare a1 b2)
echo "# LUN 1 vs LUN 2: $got"
if [[ $got == "designator "*" only on the first (4)" ]]; then
	pass "LUN 1 vs LUN 2: a designator differs first"
else
	fail "LUN 1 vs LUN 2: a designator differs first"
fi

tgtd_kill "$work/tgtd"
truncate -s 128M "$work/tgtd/disk512.img"
if tgtd_restart "$work/tgtd" >/dev/null; then
	pass "tgtd restarted with LUN 1 doubled"
	check "LUN 1 after the restart" save c1 1
	echo "# LUN 1 grown: $(<"$work/c1.txt")"
	check_eq "LUN 1 grown: the capacity differs" "$(compare a1 c1)" "capacity: 131072 vs 262144 blocks (4)"
else
	fail "tgtd restarted with LUN 1 doubled"
fi
note "$work/probe.err"
summary
